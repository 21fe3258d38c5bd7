"""Export to every format of corpus.formats that has a writer (chars, CLUENER, doccano, Prodigy,
Label Studio), and convert -> export -> convert round trips."""

import json

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab
from typer.testing import CliRunner

from spacy_cner.cli import app
from spacy_cner.corpus.export import EXPORT_FORMATS, export_docs

from test_convert import BIO, BIOES, BMES, CHARS_SEG, CLUENER, DATA_DIR, DOCCANO, LABEL_STUDIO, convert_file
from test_convert import PRODIGY, write


def summary(docs):
    """What a round trip must keep: text, tokens, entities, and whether they are annotated."""
    return [
        (doc.text, [t.text for t in doc], [(e.start, e.end, e.label_) for e in doc.ents], doc.has_annotation("ENT_IOB"))
        for doc in docs
    ]


SPACE_TOKENS = "品\tB-HC\n \tI-HC\n牌\tE-HC\n\u3000\tO\n\xa0\tS-HP\n\n{\tO\n\x85\tO\n"
INPUTS = {
    "bmes": BMES,
    "bioes": BIOES,
    "bio": BIO,
    "chars_seg": CHARS_SEG,
    "cluener": CLUENER,
    "doccano": DOCCANO,
    "prodigy": PRODIGY,
    "labelstudio": LABEL_STUDIO,
    "spaces": SPACE_TOKENS,
}


# The scheme applies to --format chars only.
EXPORTS = [("chars", "bioes"), ("chars", "bio"), ("chars", "bmes")] + [
    (name, "bioes") for name in EXPORT_FORMATS if name != "chars"
]


@pytest.mark.parametrize("export_format,scheme", EXPORTS, ids=["-".join(e) for e in EXPORTS])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_round_trip(tmp_path, name, export_format, scheme):
    docs, _ = convert_file(write(tmp_path, INPUTS[name]))
    if export_format == "chars" and not all(doc.has_annotation("ENT_IOB") for doc in docs):
        with pytest.raises(ValueError, match="has no entity annotation"):
            export_docs(docs, tmp_path / "out", format=export_format, scheme=scheme)
        assert not (tmp_path / "out").exists()
        return
    export_docs(docs, tmp_path / "out", format=export_format, scheme=scheme)
    again, stats = convert_file(tmp_path / "out")
    assert stats.format == export_format and stats.repairs == []
    assert summary(again) == summary(docs)


def test_word_segmented_docs_keep_their_spaces(tmp_path):
    nlp = spacy.blank("en")
    doc = nlp("Hello New York !")
    doc.ents = [Span(doc, 1, 3, label="GPE")]
    export_docs([doc], tmp_path / "out.txt", format="chars", scheme="bio")
    lines = (tmp_path / "out.txt").read_text("utf8").split("\n")
    assert lines[:7] == ["Hello\tO", " \tO", "New\tB-GPE", " \tI-GPE", "York\tI-GPE", " \tO", "!\tO"]
    (again,), _ = convert_file(tmp_path / "out.txt")
    assert again.text == doc.text
    assert [(e.start_char, e.end_char, e.label_) for e in again.ents] == [(6, 14, "GPE")]


def test_docs_that_cannot_be_written_raise_naming_the_doc(tmp_path):
    vocab = Vocab()
    fine = Doc(vocab, words=["好"], spaces=[False], ents=["O"])
    line_break = Doc(vocab, words=["北", "\n", "京"], spaces=[False] * 3, ents=["O"] * 3)
    with pytest.raises(ValueError, match=r"doc 1: the token '\\n' holds a line break"):
        export_docs([fine, line_break], tmp_path / "out.txt", format="chars")
    assert not (tmp_path / "out.txt").exists()
    export_docs([fine, line_break], tmp_path / "out.json", format="doccano")
    assert [doc.text for doc in convert_file(tmp_path / "out.json")[0]] == ["好", "北\n京"]
    with pytest.raises(ValueError, match="doc 0 is empty"):
        export_docs([Doc(vocab, words=[])], tmp_path / "empty.json", format="cluener")
    with pytest.raises(ValueError, match="format: expected one of"):
        export_docs([fine], tmp_path / "x", format="conll")


def test_cli_export(tmp_path):
    docs, _ = convert_file(write(tmp_path, BMES))
    DocBin(docs=docs).to_disk(tmp_path / "corpus.spacy")
    runner = CliRunner()
    out = tmp_path / "sub" / "corpus.txt"
    result = runner.invoke(app, ["export", str(tmp_path / "corpus.spacy"), str(out), "-s", "bmes"])
    assert result.exit_code == 0, result.output
    assert "Saved 2 docs, 3 entities" in result.output
    assert out.read_text("utf8") == BMES.replace(" ", "\t")
    result = runner.invoke(app, ["export", str(tmp_path / "corpus.spacy"), str(out), "-f", "cluener"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text("utf8").split("\n")[1]) == {
        "text": "中国国籍",
        "label": {"CONT": {"中国国籍": [[0, 3]]}},
    }


@pytest.mark.parametrize("export_format", EXPORT_FORMATS)
def test_real_ecommerce_round_trip(tmp_path, export_format):
    path = DATA_DIR / "ecommerce" / "dev.txt.bieos"
    if not path.exists():
        pytest.skip(f"real data not found at {path} (the shared data folder is absent)")
    docs, _ = convert_file(path)
    export_docs(docs, tmp_path / "out", format=export_format)
    again, _ = convert_file(tmp_path / "out")
    assert summary(again) == summary(docs)
    if export_format == "chars":
        assert (tmp_path / "out").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("export_format,scheme", EXPORTS, ids=["-".join(e) for e in EXPORTS])
def test_a_corpus_that_starts_with_a_byte_order_mark_round_trips(tmp_path, export_format, scheme):
    """A first doc whose text starts with U+FEFF: readers drop a byte-order mark at the start of a
    file, so the export writes one before it and the doc's own character comes back."""
    doc = spacy.blank("zh").make_doc("\ufeff张三去了上海")
    doc.ents = [Span(doc, 1, 3, "PER"), Span(doc, 5, 7, "LOC")]
    export_docs([doc], tmp_path / "out", format=export_format, scheme=scheme)
    again, _ = convert_file(tmp_path / "out")
    assert summary(again) == summary([doc])


def test_doccano_ids_come_back_through_convert_and_export(tmp_path):
    """doccano matches a re-imported record to its own by id: convert keeps it (in the .spacy file)
    and export --format doccano writes it back; records without one get none."""
    source = tmp_path / "in.jsonl"
    records = [
        {"id": 17, "text": "张三去了上海", "label": [[0, 2, "PER"]]},
        {"text": "李四", "label": []},
        {"id": "a-3", "text": "王五在北京", "label": [[3, 5, "LOC"]]},
    ]
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf8")
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(source), str(tmp_path / "corpus.spacy")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["export", str(tmp_path / "corpus.spacy"), str(tmp_path / "out.jsonl"), "-f", "doccano"]
    )
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text("utf8").splitlines()]
    assert written == records


def test_cli_export_refuses_to_write_over_its_input(tmp_path):
    docs, _ = convert_file(write(tmp_path, BMES))
    DocBin(docs=docs).to_disk(tmp_path / "corpus.spacy")
    before = (tmp_path / "corpus.spacy").read_bytes()
    result = CliRunner().invoke(app, ["export", str(tmp_path / "corpus.spacy"), str(tmp_path / "corpus.spacy")])
    assert result.exit_code == 1 and "is the input file" in " ".join(result.output.split())
    assert (tmp_path / "corpus.spacy").read_bytes() == before
