"""corpus.formats, the one table of formats: each tool's writer and reader round-trip a record, a
written file is detected as its format, and every command offers the formats the table gives it."""

import json

import pytest

from spacy_cner.corpus.convert import FORMATS as CONVERT_FORMATS
from spacy_cner.corpus.export import EXPORT_FORMATS
from spacy_cner.corpus.formats import FORMATS, OFFSET_FORMATS, TOOL_FORMATS, detect_format
from spacy_cner.corpus.json_files import write_json_records
from spacy_cner.corpus.labelstudio import chars_to_utf16, utf16_to_chars
from spacy_cner.corpus.problems import Problems
from spacy_cner.corpus.record_fields import AnnotatedText
from spacy_cner.corpus.records import read_offset_records

TEXT = "😀张三在𠀀北京"  # two characters beyond U+FFFF: Label Studio's offsets differ from ours
ENTITIES = [(1, 3, "PER"), (5, 7, "LOC")]


@pytest.mark.parametrize("name", OFFSET_FORMATS)
def test_each_tool_reads_back_what_it_writes(name):
    fmt = FORMATS[name]
    for entities in (ENTITIES, [], None):
        record = fmt.write(AnnotatedText(TEXT, entities, record_id=3))
        problems = Problems("test", False, [])
        text, candidates = fmt.read(json.loads(json.dumps(record)), 1, 0, problems)
        assert text == TEXT
        if entities is None:
            assert candidates is None
        else:
            assert sorted((start, end, label) for label, start, end, *_ in candidates) == entities


@pytest.mark.parametrize("name", OFFSET_FORMATS)
def test_a_written_file_is_detected_and_read_as_its_format(tmp_path, name):
    fmt = FORMATS[name]
    path = tmp_path / f"corpus{fmt.suffix}"
    items = [AnnotatedText(TEXT, ENTITIES, record_id=1), AnnotatedText("李四", [(0, 2, "PER")], record_id="b")]
    with path.open("w", encoding="utf8") as file:
        write_json_records((fmt.write(item) for item in items), file, array=fmt.array)
    assert detect_format(path) == name
    read = list(read_offset_records(path, name))
    ids = (None, None) if name == "cluener" else (1, "b")  # CLUENER's records carry no id
    assert read == [(list(TEXT), ENTITIES, ids[0]), (list("李四"), [(0, 2, "PER")], ids[1])]


def test_a_models_entities_go_to_label_studio_as_predictions():
    item = AnnotatedText(
        TEXT, [(1, 3, "PER", 0.9)], fields={"text": TEXT, "id": 4}, meta={"score": 0.5}, model="my_model"
    )
    task = FORMATS["labelstudio"].write(item)
    assert task["data"] == {"text": TEXT, "id": 4} and "annotations" not in task
    (prediction,) = task["predictions"]
    assert prediction["model_version"] == "my_model" and prediction["score"] == 0.5
    assert prediction["result"][0]["value"] == {"start": 2, "end": 4, "text": "张三", "labels": ["PER"]}
    assert prediction["result"][0]["score"] == 0.9


@pytest.mark.parametrize("text", ["张三在北京", TEXT, "𠀀𠀁", ""])
def test_utf16_offsets_go_both_ways(text):
    for start in range(len(text) + 1):
        for end in range(start, len(text) + 1):
            units = chars_to_utf16(text, start, end)
            assert units == (len(text[:start].encode("utf-16-le")) // 2, len(text[:end].encode("utf-16-le")) // 2)
            assert utf16_to_chars(text, *units, text[start:end]) == (start, end)


def test_the_commands_offer_the_tables_formats():
    assert CONVERT_FORMATS == ("auto",) + tuple(FORMATS)
    assert set(EXPORT_FORMATS) == {name for name, fmt in FORMATS.items() if fmt.write is not None}
    assert set(TOOL_FORMATS) == {"doccano", "prodigy", "labelstudio"}
    assert all(name in FORMATS for name in OFFSET_FORMATS)
