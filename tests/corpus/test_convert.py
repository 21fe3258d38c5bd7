"""Tests for the NER file converters and the `convert` command."""

import json
import re
import runpy
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_cner.corpus.convert import (
    ConversionStats,
    decode_tags,
    detect_format,
    detect_scheme,
    iter_docs,
    read_sentences,
)

from conftest import SHARED_DATA as DATA_DIR


def convert_file(path, format="auto", scheme="auto", repair=False):
    """The docs of one file and the conversion counts, as `python -m spacy_cner convert` gets them."""
    stats = ConversionStats(path=str(path))
    return list(iter_docs(path, format=format, scheme=scheme, repair=repair, stats=stats)), stats


BMES = "高 B-NAME\n勇 E-NAME\n： O\n男 S-RACE\n\n中 B-CONT\n国 M-CONT\n国 M-CONT\n籍 E-CONT\n\n"
BIOES = "张 B-PER\n三 I-PER\n丰 E-PER\n在 O\n京 S-LOC\n\n好 O\n"
BIO = "在 O\n北 B-LOC\n京 I-LOC\n的 O\n张 B-PER\n三 I-PER\n李 B-PER\n\n\n\n好 O\n的 O\n"
IOB1 = "在 O\n北 I-LOC\n京 I-LOC\n张 I-PER\n李 B-PER\n四 I-PER\n王 B-PER\n\n好 O\n"
CHARS_SEG = "科0\tB-PER.NAM\n比1\tI-PER.NAM\n的0\tO\n粉0\tB-PER.NOM\n丝1\tI-PER.NOM\n\n好0\tO\n"
CLUENER = (
    "\n".join(
        json.dumps(record, ensure_ascii=False)
        for record in [
            {
                "text": "浙商银行企业信贷部叶老桂",
                "label": {"name": {"叶老桂": [[9, 11]]}, "company": {"浙商银行": [[0, 3]]}},
            },
            {"text": "生生不息CSOL生化狂潮", "label": {"game": {"CSOL": [[4, 7]]}}},
            {"text": "今天天气很好", "label": {}},
        ]
    )
    + "\n"
)

# (name, content, format, scheme) of well-formed files
VALID_FILES = [
    ("bmes", BMES, "chars", "bmes"),
    ("bioes", BIOES, "chars", "bioes"),
    ("bio", BIO, "chars", "bio"),
    ("iob1", IOB1, "chars", "iob"),
    ("chars_seg", CHARS_SEG, "chars-seg", "bio"),
    ("cluener", CLUENER, "cluener", None),
]
VALID_IDS = [case[0] for case in VALID_FILES]


def write(tmp_path: Path, content: str, name: str = "input.txt", encoding: str = "utf8") -> Path:
    """Write a test input file and return its path."""
    path = tmp_path / name
    path.write_bytes(content.encode(encoding))
    return path


def reference_parse(content: str, format: str, scheme: Optional[str]):
    """Parse a well-formed file independently: sentence texts and (sentence, start, end, label)."""
    texts: List[str] = []
    ents: List[Tuple[int, int, int, str]] = []
    if format == "cluener":
        for line in content.splitlines():
            if line.strip():
                record = json.loads(line)
                for label, surfaces in record.get("label", {}).items():
                    for offsets in surfaces.values():
                        for start, end in offsets:
                            ents.append((len(texts), start, end + 1, label))
                texts.append(record["text"])
        return texts, Counter(ents)
    blocks = [block for block in content.replace("\r\n", "\n").split("\n\n") if block.strip()]
    for block in blocks:
        rows = [line.split() for line in block.strip("\n").split("\n")]
        chars = [row[0][0] if format == "chars-seg" else row[0] for row in rows]
        tags = [row[1] for row in rows]
        sent = len(texts)
        texts.append("".join(chars))
        start = None
        for i, tag in enumerate(tags + ["O"]):
            prefix, _, label = tag.partition("-")
            prev_label = tags[i - 1].partition("-")[2] if i > 0 and start is not None else None
            # IOB1: I- opens when the previous token is not in an entity of this type
            opens = prefix in "BS" or (scheme == "iob" and prefix == "I" and prev_label != label)
            if start is not None and (opens or prefix == "O"):
                ents.append((sent, start, i, prev_label))
                start = None
            if opens:
                start = i
            if prefix in "ES":
                ents.append((sent, start, i + 1, label))
                start = None
    return texts, Counter(ents)


def docbin_ents(docs) -> Counter:
    """(sentence, start, end, label) of every entity in a list of Docs."""
    return Counter((i, ent.start, ent.end, ent.label_) for i, doc in enumerate(docs) for ent in doc.ents)


@pytest.mark.parametrize("name,content,format,scheme", VALID_FILES, ids=VALID_IDS)
@pytest.mark.parametrize("detect", [False, True], ids=["given", "detected"])
def test_nothing_is_lost(tmp_path, name, content, format, scheme, detect):
    """Every sentence and every entity of a well-formed file reaches the DocBin, in order."""
    path = write(tmp_path, content)
    if detect:
        # IOB1 cannot be told from broken BIO, so it is never guessed
        docs, stats = convert_file(path, scheme="iob" if scheme == "iob" else "auto")
    else:
        docs, stats = convert_file(path, format=format, scheme=scheme or "auto")
    doc_bin = DocBin(attrs=["ORTH", "ENT_IOB", "ENT_TYPE"], docs=docs)
    docs = list(DocBin().from_bytes(doc_bin.to_bytes()).get_docs(Vocab()))
    texts, ents = reference_parse(content, format, scheme)
    assert [doc.text for doc in docs] == texts
    assert "".join(doc.text for doc in docs) == "".join(texts)
    assert docbin_ents(docs) == ents
    assert stats.n_sentences == len(texts)
    assert stats.n_chars == sum(len(text) for text in texts)
    assert stats.n_entities == sum(ents.values())
    assert stats.entity_counts == Counter(label for *_, label in ents.elements())
    assert stats.repairs == []
    for doc in docs:
        assert all(not token.whitespace_ for token in doc)
        assert all(token.ent_iob_ in ("B", "I", "O") for token in doc)


@pytest.mark.parametrize("name,content,format,scheme", VALID_FILES, ids=VALID_IDS)
def test_detect_format_and_scheme(tmp_path, name, content, format, scheme):
    path = write(tmp_path, content)
    assert detect_format(path) == format
    if name == "iob1":
        # IOB1 is never guessed: strict BIO rejects its I- openers
        with pytest.raises(ValueError, match=":2: I-LOC has no opening tag.*--scheme iob"):
            convert_file(path)
    else:
        _, stats = convert_file(path)
        assert (stats.format, stats.scheme) == (format, scheme)


def test_detect_scheme():
    assert detect_scheme(["O", "B-X", "I-X"]) == "bio"
    assert detect_scheme(["O", "B-X", "M-X", "E-X"]) == "bmes"
    assert detect_scheme(["B-X", "I-X", "E-X", "S-Y"]) == "bioes"
    assert detect_scheme(["O"]) == "bio"


def test_bom_crlf_and_no_final_blank_line(tmp_path):
    plain = write(tmp_path, BMES, name="plain.txt")
    crlf = write(tmp_path, "\ufeff" + BMES.rstrip("\n").replace("\n", "\r\n"), name="crlf.txt")
    docs_plain, _ = convert_file(plain)
    docs_crlf, stats = convert_file(crlf)
    assert [d.text for d in docs_crlf] == [d.text for d in docs_plain] == ["高勇：男", "中国国籍"]
    assert docbin_ents(docs_crlf) == docbin_ents(docs_plain)
    assert stats.scheme == "bmes"


def test_blank_lines_and_only_o_sentences(tmp_path):
    path = write(tmp_path, "\n\n好 O\n\n\n\n \t\n坏 O\n的 O\n\n\n")
    docs, stats = convert_file(path)
    assert [doc.text for doc in docs] == ["好", "坏的"]
    assert stats.n_entities == 0
    assert all(doc.has_annotation("ENT_IOB") for doc in docs)
    assert [token.ent_iob_ for token in docs[1]] == ["O", "O"]


@pytest.mark.parametrize("content", ["", "\n\n \n", "\ufeff\r\n"])
def test_empty_file_has_no_sentences(tmp_path, content):
    path = write(tmp_path, content)
    with pytest.raises(ValueError, match="holds no sentences"):
        convert_file(path)


def test_cluener_without_label_is_unannotated(tmp_path):
    content = '{"text": "我爱北京"}\n{"text": "你好", "label": {}}\n'
    docs, stats = convert_file(write(tmp_path, content))
    assert not docs[0].has_annotation("ENT_IOB")
    assert docs[1].has_annotation("ENT_IOB")
    assert stats.n_unannotated == 1
    assert stats.n_sentences == 2 and stats.n_entities == 0
    doc_bin = DocBin(attrs=["ORTH", "ENT_IOB", "ENT_TYPE"], docs=docs)
    loaded = list(DocBin().from_bytes(doc_bin.to_bytes()).get_docs(Vocab()))
    assert not loaded[0].has_annotation("ENT_IOB")
    assert loaded[1].has_annotation("ENT_IOB")


def _cluener(text: str, label: dict) -> str:
    return json.dumps({"text": text, "label": label}, ensure_ascii=False)


OK_LINE = _cluener("你好", {})
# (id, content, format, scheme, error line, repair kind, entities after repair per sentence)
MALFORMED = [
    ("no_tag", "高 B-NAME\n勇\n", "chars", "auto", 2, "missing_tag", [[(0, 1, "NAME")]]),
    ("three_columns", "高 B-NAME\n勇 x I-NAME\n", "chars", "bio", 2, "extra_columns", [[(0, 2, "NAME")]]),
    ("unknown_prefix", "高 O\n勇 X-ORG\n", "chars", "bio", 2, "unknown_tag", [[]]),
    ("underscore", "高 B_PER\n", "chars", "bio", 1, "unknown_tag", [[]]),
    ("empty_type", "高 O\n\n勇 B-\n", "chars", "bio", 3, "unknown_tag", [[], []]),
    ("i_in_bmes", "高 S-X\n勇 I-X\n男 S-X\n", "chars", "bmes", 2, "unknown_tag", [[(0, 1, "X"), (2, 3, "X")]]),
    ("bio_i_opens", "高 O\n勇 I-PER\n男 I-PER\n", "chars", "bio", 2, "missing_opening", [[(1, 3, "PER")]]),
    ("bio_type_change", "高 B-ORG\n勇 I-LOC\n", "chars", "bio", 2, "type_mismatch", [[(0, 1, "ORG"), (1, 2, "LOC")]]),
    ("iob1_b_opens", "高 O\n勇 B-PER\n", "chars", "iob", 2, "iob1_b_opening", [[(1, 2, "PER")]]),
    ("bmes_m_opens", "a O\n\n高 M-ORG\n勇 E-ORG\n", "chars", "auto", 3, "missing_opening", [[], [(0, 2, "ORG")]]),
    ("bioes_e_opens", "高 O\n勇 E-ORG\n", "chars", "bioes", 2, "missing_opening", [[(1, 2, "ORG")]]),
    ("bmes_b_then_o", "高 B-X\n勇 O\n", "chars", "bmes", 1, "unclosed_entity", [[(0, 1, "X")]]),
    (
        "bmes_b_then_b",
        "高 B-X\n勇 M-X\n男 B-Y\n的 E-Y\n",
        "chars",
        "bmes",
        2,
        "unclosed_entity",
        [[(0, 2, "X"), (2, 4, "Y")]],
    ),
    ("bmes_b_at_end", "a O\n高 B-X\n勇 M-X\n\n的 O\n", "chars", "bmes", 3, "unclosed_entity", [[(1, 3, "X")], []]),
    (
        "bmes_type_change",
        "高 B-ORG\n勇 M-LOC\n男 E-LOC\n",
        "chars",
        "bmes",
        2,
        "type_mismatch",
        [[(0, 1, "ORG"), (1, 3, "LOC")]],
    ),
    ("seg_token", "科0 B-PER.NAM\n比 I-PER.NAM\n", "chars-seg", "auto", 2, "bad_token", [[(0, 2, "PER.NAM")]]),
    (
        "cluener_overlap",
        OK_LINE + "\n" + _cluener("北京大学", {"LOC": {"北京": [[0, 1]]}, "ORG": {"北京大学": [[0, 3]]}}),
        "cluener",
        "auto",
        2,
        "overlap",
        [[], [(0, 4, "ORG")]],
    ),
    ("cluener_range", _cluener("北京", {"LOC": {"北京": [[0, 2]]}}), "cluener", "auto", 1, "span_out_of_range", [[]]),
    (
        "cluener_surface",
        OK_LINE + "\n" + _cluener("北京", {"LOC": {"南京": [[0, 1]]}}),
        "cluener",
        "auto",
        2,
        "surface_mismatch",
        [[], []],
    ),
    ("cluener_json", OK_LINE + "\n\n" + '{"text": "北京", "label": {', "cluener", "auto", 3, "invalid_json", [[]]),
    (
        "cluener_empty",
        OK_LINE + "\n" + '{"text": "", "label": {}}\n' + OK_LINE,
        "cluener",
        "auto",
        2,
        "empty_text",
        [[], []],
    ),
]


@pytest.mark.parametrize(
    "content,format,scheme,line,kind,repaired",
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_raises_then_repairs(tmp_path, content, format, scheme, line, kind, repaired):
    path = write(tmp_path, content)
    with pytest.raises(ValueError) as excinfo:
        convert_file(path, format=format, scheme=scheme)
    message = str(excinfo.value)
    assert message.startswith(f"{path}:{line}: ")
    assert "--repair" in message and "expected" in message
    docs, stats = convert_file(path, format=format, scheme=scheme, repair=True)
    assert stats.repair_counts == Counter({kind: 1})
    assert [r.line for r in stats.repairs] == [line]
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs] == repaired
    assert all(doc.has_annotation("ENT_IOB") for doc in docs)


def test_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes("高 B-NAME\n勇 E-NAME\n".encode("utf8") + b"\xff\xfe O\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: invalid UTF-8"):
        convert_file(path)
    docs, stats = convert_file(path, repair=True)
    assert stats.repair_counts == Counter({"bad_utf8": 1})
    assert docs[0].text == "高勇\ufffd\ufffd"


def test_gbk_file_fails_with_hint(tmp_path):
    path = write(tmp_path, "高 B-NAME\n勇 E-NAME\n", encoding="gb18030")
    with pytest.raises(ValueError, match=r":1: invalid UTF-8.*iconv"):
        convert_file(path)


def test_repairs_are_all_counted(tmp_path):
    content = "高 M-ORG\n勇 E-ORG\n男\n的 B-X\n\n中 B-LOC\n国 M-PER\n人 E-PER\n了 Q-A\n"
    docs, stats = convert_file(write(tmp_path, content), repair=True)
    assert stats.repair_counts == Counter(
        {"missing_opening": 1, "missing_tag": 1, "unclosed_entity": 1, "type_mismatch": 1, "unknown_tag": 1}
    )
    assert stats.n_repairs == 5
    assert [r.sentence for r in stats.repairs] == [0, 0, 0, 1, 1]
    assert docbin_ents(docs) == Counter([(0, 0, 2, "ORG"), (0, 3, 4, "X"), (1, 0, 1, "LOC"), (1, 1, 3, "PER")])
    assert stats.n_entities == 4


def test_cluener_overlap_keeps_longer_and_lists_dropped(tmp_path):
    label = {
        "LOC": {"北京": [[0, 1]], "大学": [[2, 3]]},
        "ORG": {"北京大学": [[0, 3]]},
        "PER": {"张三": [[4, 5]]},
    }
    docs, stats = convert_file(write(tmp_path, _cluener("北京大学张三", label)), repair=True)
    assert [(e.start, e.end, e.label_) for e in docs[0].ents] == [(0, 4, "ORG"), (4, 6, "PER")]
    assert stats.repair_counts == Counter({"overlap": 2})
    dropped = " ".join(r.message for r in stats.repairs)
    assert "'北京'" in dropped and "'大学'" in dropped


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_decode_tags_inverts_encoding(data):
    """Spans encoded in any scheme decode back to the same spans."""
    n = data.draw(st.integers(1, 12))
    spans = []
    i = 0
    while i < n:
        length = data.draw(st.integers(0, n - i))
        if length:
            spans.append((i, i + length, data.draw(st.sampled_from(["PER", "LOC", "PER.NAM"]))))
        i += max(length, 1)
    for scheme in ("bio", "iob", "bmes", "bioes"):
        tags = _encode(spans, n, scheme)
        assert decode_tags(tags, scheme) == (spans, []), tags


def _encode(spans, n: int, scheme: str) -> List[str]:
    """Test-side encoder of spans into tags."""
    tags = ["O"] * n
    middle = "M" if scheme == "bmes" else "I"
    previous_end, previous_label = -1, None
    for start, end, label in spans:
        if scheme in ("bio", "iob"):
            follows_same = previous_end == start and previous_label == label
            first = "B" if scheme == "bio" or follows_same else "I"
            tags[start:end] = [f"{first}-{label}"] + [f"I-{label}"] * (end - start - 1)
        elif end - start == 1:
            tags[start] = f"S-{label}"
        else:
            inside = [f"{middle}-{label}"] * (end - start - 2)
            tags[start:end] = [f"B-{label}"] + inside + [f"E-{label}"]
        previous_end, previous_label = end, label
    return tags


def test_read_sentences_streams(tmp_path):
    path = write(tmp_path, BIO)
    sentences = read_sentences(path)
    first = next(sentences)
    assert first.tokens == list("在北京的张三李") and first.lines[0] == 1
    assert next(sentences).lines == [11, 12]


def test_bad_choices(tmp_path):
    path = write(tmp_path, BIO)
    with pytest.raises(ValueError, match="format: expected one of"):
        convert_file(path, format="conll")
    with pytest.raises(ValueError, match="scheme: expected one of"):
        convert_file(path, scheme="bilou")


def test_cli_convert(tmp_path):
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    runner = CliRunner()
    path = write(tmp_path, BMES)
    output = tmp_path / "out" / "sub" / "train.spacy"
    result = runner.invoke(app, ["convert", str(path), str(output)])
    assert result.exit_code == 0, result.output
    assert "2 sentences, 8 characters, 3 entities" in result.output
    assert "CONT" in result.output and "RACE" in result.output
    docs = list(DocBin().from_disk(output).get_docs(Vocab()))
    texts, ents = reference_parse(BMES, "chars", "bmes")
    assert [doc.text for doc in docs] == texts
    assert docbin_ents(docs) == ents

    bad = write(tmp_path, "高 B-X\n勇 O\n", name="bad.txt")
    result = runner.invoke(app, ["convert", str(bad), str(tmp_path / "bad.spacy"), "-s", "bmes"])
    assert result.exit_code == 1
    assert f"{bad}:1: X entity opened by B-X" in result.output
    assert not (tmp_path / "bad.spacy").exists()

    result = runner.invoke(app, ["convert", str(bad), str(tmp_path), "--repair", "-s", "bmes"])
    assert result.exit_code == 0, result.output
    assert "unclosed_entity" in result.output and "1 repairs" in result.output
    assert len(DocBin().from_disk(tmp_path / "bad.spacy")) == 1


def test_cli_convert_into_a_folder_keeps_the_split_in_the_name(tmp_path):
    """Weibo's splits differ only in their extension: converted into one folder they must not
    overwrite each other; a text format's extension is dropped; an overwrite is announced."""
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    runner = CliRunner()
    folder = tmp_path / "corpus"
    folder.mkdir()
    sources = {"weiboNER_2nd_conll.train": CHARS_SEG, "weiboNER_2nd_conll.dev": CHARS_SEG.split("\n\n")[0] + "\n"}
    for name, content in {**sources, "test.char.bmes": BMES, "dev.json": CLUENER}.items():
        result = runner.invoke(app, ["convert", str(write(tmp_path, content, name=name)), str(folder)])
        assert result.exit_code == 0, result.output
        assert "Overwriting" not in result.output
        if name == "weiboNER_2nd_conll.dev":
            assert "1 sentence, 5 characters, 2 entities" in result.output
    names = sorted(path.name for path in folder.iterdir())
    assert names == ["dev.spacy", "test.char.spacy", "weiboNER_2nd_conll.dev.spacy", "weiboNER_2nd_conll.train.spacy"]
    assert len(DocBin().from_disk(folder / "weiboNER_2nd_conll.train.spacy")) == 2
    assert len(DocBin().from_disk(folder / "weiboNER_2nd_conll.dev.spacy")) == 1
    result = runner.invoke(app, ["convert", str(tmp_path / "test.char.bmes"), str(folder)])
    assert result.exit_code == 0 and "Overwriting" in result.output
    assert "test.char.spacy" in result.output.split("Overwriting")[1].split("Saved")[0]


def test_python_m_convert(tmp_path, monkeypatch, capsys):
    """`python -m spacy_cner convert` runs __main__ (in-process, to skip a second spaCy import)."""
    path = write(tmp_path, CHARS_SEG)
    output = tmp_path / "weibo.spacy"
    argv = ["spacy_cner", "convert", str(path), str(output), "--format", "chars-seg"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as excinfo:
        runpy.run_module("spacy_cner", run_name="__main__")
    assert excinfo.value.code == 0, capsys.readouterr().out
    docs = list(DocBin().from_disk(output).get_docs(Vocab()))
    assert [doc.text for doc in docs] == ["科比的粉丝", "好"]
    assert [e.label_ for e in docs[0].ents] == ["PER.NAM", "PER.NOM"]


def _real_file(*parts: str) -> Path:
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not found at {path} (the shared data folder is absent)")
    return path


def _sentence_lines(path: Path) -> List[List[int]]:
    """The 1-based line numbers of each sentence's tokens, read independently."""
    sentences: List[List[int]] = [[]]
    with path.open(encoding="utf8") as file_:
        for line_no, line in enumerate(file_, start=1):
            if line.strip():
                sentences[-1].append(line_no)
            elif sentences[-1]:
                sentences.append([])
    return [s for s in sentences if s]


def test_real_resume_train():
    path = _real_file("resume", "train.char.bmes")
    lines = _sentence_lines(path)
    # The entities at sentences 1836 and 1893 were split by a blank line: the previous sentence
    # ends inside B-ORG ... M-ORG and the sentence opens with M-ORG.
    with pytest.raises(ValueError) as excinfo:
        convert_file(path)
    assert str(excinfo.value).startswith(f"{path}:{lines[1835][-1]}: ORG entity opened by B-ORG")
    docs, stats = convert_file(path, repair=True)
    print(
        f"\n{path}: {stats.n_sentences} sentences, {stats.n_chars} chars, "
        f"{stats.n_entities} entities, {dict(sorted(stats.entity_counts.items()))}, "
        f"repairs {dict(stats.repair_counts)}"
    )
    for repair in stats.repairs:
        print(f"  line {repair.line} sentence {repair.sentence}: [{repair.kind}] {repair.message}")
    assert (stats.n_sentences, stats.n_chars, stats.n_entities) == (3821, 124099, 13440)
    assert stats.entity_counts == {
        "CONT": 260,
        "EDU": 858,
        "LOC": 47,
        "NAME": 952,
        "ORG": 4613,
        "PRO": 287,
        "RACE": 115,
        "TITLE": 6308,
    }
    openers = [(r.sentence, r.line) for r in stats.repairs if r.kind == "missing_opening"]
    assert openers == [(1836, lines[1836][0]), (1893, lines[1893][0])]
    unclosed = [(r.sentence, r.line) for r in stats.repairs if r.kind == "unclosed_entity"]
    assert unclosed == [(1835, lines[1835][-1]), (1892, lines[1892][-1])]
    assert stats.n_repairs == 4
    assert len(docs) == 3821 and docs[1836].ents[0].start == 0


def test_real_peoples_daily_dev():
    path = _real_file("peoples_daily", "example.dev")
    docs, stats = convert_file(path)
    print(
        f"\n{path}: {stats.n_sentences} sentences, {stats.n_chars} chars, "
        f"{stats.n_entities} entities, {dict(sorted(stats.entity_counts.items()))}"
    )
    assert (stats.n_sentences, stats.n_chars, stats.n_entities) == (2318, 109870, 3819)
    assert stats.entity_counts == {"LOC": 1951, "ORG": 984, "PER": 884}
    texts, ents = reference_parse(path.read_text(encoding="utf8"), "chars", "bio")
    assert [doc.text for doc in docs] == texts
    assert docbin_ents(docs) == ents


# --- Real-world input: Weibo suffixes, blank tokens, invisible characters, encodings ---


def tokens_and_ents(docs) -> List[Tuple[List[str], List[Tuple[int, int, str]]]]:
    return [([t.text for t in doc], [(e.start, e.end, e.label_) for e in doc.ents]) for doc in docs]


def test_weibo_read_as_plain_chars_warns_that_the_digits_stay(tmp_path):
    """--format chars on a Weibo file keeps 科0 whole (the user asked for it), and says so."""
    path = write(tmp_path, CHARS_SEG)
    with pytest.warns(UserWarning, match="format 'chars-seg'"):
        docs = list(iter_docs(path, format="chars"))
    assert docs[0].text == "科0比1的0粉0丝1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [doc.text for doc in iter_docs(path, format="chars-seg")] == ["科比的粉丝", "好"]
        assert len(list(iter_docs(write(tmp_path, BMES, name="plain.txt"), format="chars"))) == 2


def test_weibo_two_digit_positions_and_multi_code_point_characters(tmp_path):
    """`s15` is s at word position 15, `115` the digit 1 at 15, `��0` one two-code-point token."""
    content = "科0\tB-PER.NAM\n比1\tI-PER.NAM\ns15\tO\n115\tO\n\ufffd\ufffd0\tO\n好0\tO\n"
    path = write(tmp_path, content)
    assert detect_format(path) == "chars-seg"
    docs, stats = convert_file(path)
    assert tokens_and_ents(docs) == [(["科", "比", "s", "1", "\ufffd\ufffd", "好"], [(0, 2, "PER.NAM")])]
    assert stats.repairs == [] and stats.note_counts == Counter({"multi_char_token": 1})
    assert stats.notes[0].line == 5


@pytest.mark.parametrize(
    "line,token",
    [
        (" \tI-HC", " "),
        ("  I-HC", " "),
        ("\u3000 I-HC", "\u3000"),
        ("\xa0 I-HC", "\xa0"),
        ("\u3000\tI-HC", "\u3000"),
        (" \t I-HC", " \t"),
    ],
    ids=["space-tab", "space-space", "ideographic", "nbsp", "ideographic-tab", "space-tab-space"],
)
def test_blank_character_inside_an_entity(tmp_path, line, token):
    """A line is split at its last separator: a blank character keeps its tag and its entity."""
    path = write(tmp_path, f"品\tB-HC\n{line}\n牌\tE-HC\n在\tO\n")
    docs, stats = convert_file(path)
    assert tokens_and_ents(docs) == [(["品", token, "牌", "在"], [(0, 3, "HC")])]
    assert docs[0].text == f"品{token}牌在"
    assert stats.repairs == []


def test_tag_only_line_is_a_missing_character(tmp_path):
    path = write(tmp_path, "高 B-X\n\tE-X\n")
    with pytest.raises(ValueError, match=r":2: line '\\tE-X' has a tag but no character"):
        convert_file(path)


@pytest.mark.parametrize("invisible", ["\xa0", "\x0b", "\u200b"])
def test_invisible_characters_after_a_tag(tmp_path, invisible):
    path = write(tmp_path, f"高 B-NAME{invisible}\n勇 E-NAME\n")
    with pytest.raises(ValueError) as excinfo:
        convert_file(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}:1: tag ") and repr(invisible)[1:-1] in message
    docs, stats = convert_file(path, repair=True)
    assert tokens_and_ents(docs) == [(["高", "勇"], [(0, 2, "NAME")])]
    assert stats.repair_counts == Counter({"invisible_in_tag": 1})


def test_trailing_spaces_and_tabs_after_a_tag_are_separators(tmp_path):
    docs, stats = convert_file(write(tmp_path, "高 B-NAME \t\n勇 E-NAME\t\n"))
    assert tokens_and_ents(docs) == [(["高", "勇"], [(0, 2, "NAME")])]
    assert stats.repairs == [] and stats.notes == []


def test_lone_surrogate_in_json_names_the_line_and_repairs(tmp_path):
    record = '{"text": "\\udcff北京", "label": {"LOC": {"北京": [[1, 2]]}}}'
    path = write(tmp_path, OK_LINE + "\n" + record + "\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: text .* lone surrogates"):
        convert_file(path)
    docs, stats = convert_file(path, repair=True)
    assert [doc.text for doc in docs] == ["你好", "\ufffd北京"]
    assert [(e.start, e.end, e.label_) for e in docs[1].ents] == [(1, 3, "LOC")]
    assert stats.repair_counts == Counter({"lone_surrogate": 1})
    DocBin(docs=docs).to_bytes()  # the repaired text is valid Unicode


def test_invalid_utf8_in_json_lines_names_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(OK_LINE.encode("utf8") + b'\n{"text": "\xff\xfe\xe5\x8c\x97", "label": {}}\n')
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: invalid UTF-8"):
        convert_file(path)
    docs, stats = convert_file(path, repair=True)
    assert [doc.text for doc in docs] == ["你好", "\ufffd\ufffd北"]
    assert stats.repair_counts == Counter({"bad_utf8": 1})


@pytest.mark.parametrize("first", ["{", "["])
def test_chars_file_starting_with_a_bracket_is_not_json(tmp_path, first):
    path = write(tmp_path, f"{first} O\n北 B-LOC\n京 I-LOC\n")
    assert detect_format(path) == "chars"
    docs, _ = convert_file(path)
    assert tokens_and_ents(docs) == [([first, "北", "京"], [(1, 3, "LOC")])]


def test_docstart_lines_are_skipped_and_counted(tmp_path):
    content = "-DOCSTART- -X- O O\n\n北 B-LOC\n京 I-LOC\n\n-DOCSTART- O\n\n好 O\n"
    docs, stats = convert_file(write(tmp_path, content))
    assert [doc.text for doc in docs] == ["北京", "好"]
    assert stats.note_counts == Counter({"docstart": 2}) and stats.repairs == []


def test_line_separators_inside_a_line_do_not_split_it(tmp_path):
    """U+0085, U+2028, U+2029, \\x0b and \\x0c are characters here; only \\n ends a line."""
    content = "\x85 O\n\u2028 O\n\u2029 O\n\x0b O\n\x0c O\n高 S-X\n"
    for format, scheme in (("chars", "auto"), ("chars", "bioes")):
        docs, stats = convert_file(write(tmp_path, content), format=format, scheme=scheme)
        assert tokens_and_ents(docs) == [(list("\x85\u2028\u2029\x0b\x0c高"), [(5, 6, "X")])]
    record = json.dumps({"text": "北\u2028京\x85", "label": {"LOC": {"北\u2028京": [[0, 2]]}}}, ensure_ascii=False)
    docs, _ = convert_file(write(tmp_path, record + "\n", name="x.json"))
    assert tokens_and_ents(docs) == [(list("北\u2028京\x85"), [(0, 3, "LOC")])]


def test_multi_character_tokens_are_reported(tmp_path, capsys):
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    path = write(tmp_path, "张三 S-NAME\n在 O\n北京 S-LOC\n")
    docs, stats = convert_file(path, format="chars")
    assert tokens_and_ents(docs) == [(["张三", "在", "北京"], [(0, 1, "NAME"), (2, 3, "LOC")])]
    assert [(n.kind, n.line) for n in stats.notes] == [("multi_char_token", 1), ("multi_char_token", 3)]
    result = CliRunner().invoke(app, ["convert", str(path), str(tmp_path / "out.spacy")])
    assert result.exit_code == 0, result.output
    assert "multi_char_token" in result.output and f"{path}:3: [multi_char_token]" in result.output


# --- Annotation-tool formats ---

DOCCANO = (
    "\n".join(
        [
            json.dumps({"id": 1, "text": "张三在北京", "label": [[0, 2, "PER"], [3, 5, "LOC"]]}, ensure_ascii=False),
            json.dumps({"id": 2, "text": "好的", "label": []}, ensure_ascii=False),
            json.dumps(
                {"text": "李四", "entities": [{"id": 7, "start_offset": 0, "end_offset": 2, "label": "PER"}]},
                ensure_ascii=False,
            ),
        ]
    )
    + "\n"
)
PRODIGY = (
    "\n".join(
        [
            json.dumps(
                {
                    "text": "张三在北京",
                    "spans": [{"start": 0, "end": 2, "label": "PER"}, {"start": 3, "end": 5, "label": "LOC"}],
                    "answer": "accept",
                },
                ensure_ascii=False,
            ),
            json.dumps({"text": "错的", "spans": [], "answer": "reject"}, ensure_ascii=False),
            json.dumps({"text": "好的", "spans": []}, ensure_ascii=False),
        ]
    )
    + "\n"
)
LABEL_STUDIO = json.dumps(
    [
        {
            "id": 1,
            "data": {"text": "张三在北京"},
            "annotations": [
                {
                    "was_cancelled": False,
                    "result": [
                        {"type": "labels", "value": {"start": 0, "end": 2, "text": "张三", "labels": ["PER"]}},
                        {"type": "labels", "value": {"start": 3, "end": 5, "text": "北京", "labels": ["LOC"]}},
                    ],
                }
            ],
        },
        # JavaScript offsets: the emoji counts as two UTF-16 units
        {
            "id": 2,
            "data": {"text": "😀李四"},
            "annotations": [
                {
                    "result": [
                        {"type": "labels", "value": {"start": 2, "end": 4, "text": "李四", "labels": ["PER"]}},
                    ]
                }
            ],
        },
        {"id": 3, "data": {"text": "未标注"}, "annotations": []},
    ],
    ensure_ascii=False,
    indent=2,
)


@pytest.mark.parametrize(
    "content,format,expected",
    [
        (
            DOCCANO,
            "doccano",
            [(list("张三在北京"), [(0, 2, "PER"), (3, 5, "LOC")]), (list("好的"), []), (list("李四"), [(0, 2, "PER")])],
        ),
        (PRODIGY, "prodigy", [(list("张三在北京"), [(0, 2, "PER"), (3, 5, "LOC")]), (list("好的"), [])]),
        (
            LABEL_STUDIO,
            "labelstudio",
            [
                (list("张三在北京"), [(0, 2, "PER"), (3, 5, "LOC")]),
                (list("😀李四"), [(1, 3, "PER")]),
                (list("未标注"), []),
            ],
        ),
    ],
    ids=["doccano", "prodigy", "labelstudio"],
)
def test_annotation_tool_formats(tmp_path, content, format, expected):
    path = write(tmp_path, content, name="export.json")
    assert detect_format(path) == format
    docs, stats = convert_file(path)
    assert stats.format == format
    assert tokens_and_ents(docs) == expected
    if format == "labelstudio":
        assert not docs[2].has_annotation("ENT_IOB") and stats.n_unannotated == 1
    if format == "prodigy":
        assert stats.note_counts == Counter({"prodigy_not_accepted": 1})


def test_label_studio_errors_name_the_task_line(tmp_path):
    tasks = json.loads(LABEL_STUDIO)
    tasks[1]["annotations"][0]["result"][0]["value"]["text"] = "王五"
    path = write(tmp_path, json.dumps(tasks, ensure_ascii=False, indent=2), name="ls.json")
    lines = path.read_text("utf8").split("\n")
    task_line = next(i for i, text in enumerate(lines, 1) if '"id": 2' in text) - 1
    assert lines[task_line - 1].strip() == "{"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{task_line}: task 2 result"):
        convert_file(path)
    docs, stats = convert_file(path, repair=True)
    assert len(stats.repairs) == 1 and stats.repairs[0].line == task_line
    assert [doc.text for doc in docs] == ["张三在北京", "😀李四", "未标注"] and docs[1].ents == ()


def test_doccano_bad_span_is_a_problem(tmp_path):
    path = write(tmp_path, json.dumps({"text": "北京", "label": [[0, 9, "LOC"], [0, 2]]}) + "\n")
    with pytest.raises(ValueError, match=r":1: span \[0, 2\]: expected \[start, end, label\]"):
        convert_file(path)
    docs, stats = convert_file(path, repair=True)
    assert stats.repair_counts == Counter({"span_out_of_range": 1, "invalid_span": 1})
    assert docs[0].text == "北京" and docs[0].ents == ()


# --- Real files: every dataset in ../shared/data, Doc texts equal to the source ---


def reference_sentences(path: Path, sep: str) -> List[Tuple[str, List[Tuple[int, int, str]]]]:
    """Each sentence's text and entities, read as SOURCE.md says (split at the last `sep`).

    An entity starts at B-/S- (or at an I-/M-/E- with nothing open) and ends at E-/S-, at O,
    at another opening or at a label change, so an unclosed B- counts as a one-character
    entity, as SOURCE.md counts it.
    """
    sentences = []
    chars, tags = [], []
    for line in path.read_bytes().decode("utf8").split("\n") + [""]:
        line = line.rstrip("\r")
        if line == "":
            if chars:
                sentences.append(("".join(chars), _reference_spans(tags)))
            chars, tags = [], []
            continue
        char, tag = line.rsplit(sep, 1)
        chars.append(char)
        tags.append(tag)
    return sentences


def _reference_spans(tags: List[str]) -> List[Tuple[int, int, str]]:
    spans, start, label = [], None, None
    for i, tag in enumerate(tags + ["O"]):
        prefix, _, tag_label = tag.partition("-")
        if start is not None and (prefix in ("O", "B", "S") or tag_label != label):
            spans.append((start, i, label))
            start = None
        if prefix == "S":
            spans.append((i, i + 1, tag_label))
        elif prefix != "O" and start is None:
            start, label = i, tag_label
        if prefix == "E" and start is not None:
            spans.append((start, i + 1, label))
            start = None
    return spans


# (dataset, file, separator, strict conversion raises at line, sentences, chars, entities per type)
REAL_FILES = [
    ("ecommerce", "train.txt.bieos", "\t", 82, 3989, 119085, {"HC": 10480, "HP": 1630}),
    ("ecommerce", "dev.txt.bieos", "\t", None, 500, 14885, {"HC": 1340, "HP": 200}),
    ("ecommerce", "test.txt.bieos", "\t", None, 498, 14680, {"HC": 1345, "HP": 222}),
    ("youku", "train.txt", " ", None, 8001, 136240, {"MISC": 2128, "PER": 3559, "TELEVISION": 7067}),
    ("youku", "dev.txt", " ", None, 1000, 16346, {"MISC": 257, "PER": 424, "TELEVISION": 900}),
    ("youku", "test.txt", " ", None, 1001, 17213, {"MISC": 246, "PER": 419, "TELEVISION": 905}),
    ("taobao", "train.txt", " ", None, 6000, 174562, {"HCCX": 20656, "HPPX": 2803, "MISC": 4322, "XH": 1616}),
    ("taobao", "dev.txt", " ", None, 998, 29186, {"HCCX": 3430, "HPPX": 484, "MISC": 755, "XH": 272}),
    ("taobao", "test.txt", " ", None, 1000, 29071, {"HCCX": 3378, "HPPX": 474, "MISC": 729, "XH": 285}),
    ("resume", "dev.char.bmes", " ", None, 463, 13890, None),
    ("resume", "test.char.bmes", " ", None, 477, 15100, None),
    ("peoples_daily", "example.test", " ", None, 4636, 219197, {"LOC": 3658, "ORG": 2185, "PER": 1864}),
]


@pytest.mark.parametrize(
    "dataset,name,sep,bad_line,n_sents,n_chars,counts", REAL_FILES, ids=[f"{case[0]}/{case[1]}" for case in REAL_FILES]
)
def test_real_file_texts_and_entities_survive(dataset, name, sep, bad_line, n_sents, n_chars, counts):
    """Counts as SOURCE.md gives them; each Doc's text is its source characters joined."""
    path = _real_file(dataset, name)
    if bad_line is not None:
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{bad_line}: "):
            convert_file(path)
    docs, stats = convert_file(path, repair=bad_line is not None)
    assert stats.n_repairs == (bad_line is not None)
    reference = reference_sentences(path, sep)
    assert (stats.n_sentences, stats.n_chars) == (n_sents, n_chars)
    assert [doc.text for doc in docs] == [text for text, _ in reference]
    assert all(len(doc) == len(doc.text) for doc in docs)
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs] == [spans for _, spans in reference]
    if counts is not None:
        assert dict(stats.entity_counts) == counts


# --- Fuzz: random files in every format convert to their texts and entities ---

# Characters that break naive readers: blanks, separators Python treats as line breaks,
# controls, brackets, digits, Latin letters, an astral character.
FUZZ_CHARS = list("北京大学张三丰的aZ19{[-") + [
    " ",
    "\t",
    "\u3000",
    "\xa0",
    "\x85",
    "\u2028",
    "\x0b",
    "\x0c",
    "\x00",
    "\ufffd",
    "😀",
    "\u200d",
]


def _fuzz_file(format: str, scheme: str, sentences, separator: str) -> str:
    if format == "chars":
        blocks = []
        for chars, spans in sentences:
            tags = _encode(spans, len(chars), scheme)
            blocks.append("".join(f"{c}{separator}{t}\n" for c, t in zip(chars, tags)))
        return "\n".join(blocks) + "\n"
    if format == "chars-seg":
        blocks = []
        for chars, spans in sentences:
            tags = _encode(spans, len(chars), scheme)
            blocks.append("".join(f"{c}{i % 20}{separator}{t}\n" for i, (c, t) in enumerate(zip(chars, tags))))
        return "\n".join(blocks) + "\n"
    records = []
    for chars, spans in sentences:
        text = "".join(chars)
        if format == "cluener":
            label: dict = {}
            for s, e, lab in spans:
                label.setdefault(lab, {}).setdefault(text[s:e], []).append([s, e - 1])
            records.append({"text": text, "label": label})
        elif format == "doccano":
            records.append({"text": text, "label": [[s, e, lab] for s, e, lab in spans]})
        elif format == "prodigy":
            records.append(
                {
                    "text": text,
                    "spans": [{"start": s, "end": e, "label": lab} for s, e, lab in spans],
                    "answer": "accept",
                }
            )
        else:  # Label Studio: offsets in UTF-16 units, as its front end counts them

            def units(i):
                return len(text[:i].encode("utf-16-le")) // 2

            result = [
                {"type": "labels", "value": {"start": units(s), "end": units(e), "text": text[s:e], "labels": [lab]}}
                for s, e, lab in spans
            ]
            records.append({"data": {"text": text}, "annotations": [{"result": result}]})
    if format == "labelstudio":
        return json.dumps(records, ensure_ascii=False, indent=1)
    return "".join(json.dumps(r, ensure_ascii=bool(len(records) % 2)) + "\n" for r in records)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_random_files_keep_texts_and_entities(tmp_path_factory, data):
    format = data.draw(st.sampled_from(["chars", "chars-seg", "cluener", "doccano", "prodigy", "labelstudio"]))
    scheme = data.draw(st.sampled_from(["bio", "bioes", "bmes"]))
    separator = data.draw(st.sampled_from(["\t", " "]))
    sentences = []
    for _ in range(data.draw(st.integers(1, 4))):
        chars = data.draw(st.lists(st.sampled_from(FUZZ_CHARS), min_size=1, max_size=10))
        if format in ("chars", "chars-seg") and separator == " ":
            chars = [c for c in chars if c != "\t"] or ["北"]
        spans, i = [], 0
        while i < len(chars):
            length = data.draw(st.integers(0, len(chars) - i))
            if length:
                spans.append((i, i + length, data.draw(st.sampled_from(["PER", "LOC", "HC"]))))
            i += max(length, 1)
        sentences.append((chars, spans))
    path = tmp_path_factory.mktemp("fuzz") / "input"
    path.write_text(_fuzz_file(format, scheme, sentences, separator), encoding="utf8")
    docs, stats = convert_file(path)
    assert stats.format == format and stats.repairs == []
    assert [doc.text for doc in docs] == ["".join(chars) for chars, _ in sentences]
    assert [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs] == [
        spans for _, spans in sentences
    ]
    # Each character is a token (character offsets equal token offsets)
    assert all(len(doc) == len(doc.text) for doc in docs)


def test_cli_convert_refuses_to_write_over_its_input(tmp_path):
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    path = write(tmp_path, BMES, name="train.spacy")
    result = CliRunner().invoke(app, ["convert", str(path), str(path), "-f", "chars"])
    assert result.exit_code == 1 and "is the input file" in " ".join(result.output.split())
    assert path.read_text(encoding="utf8") == BMES


def test_a_malformed_line_names_the_cli_option(tmp_path):
    """Issue 81: the message ended "(repair=True)", the function's argument, where the user runs the CLI."""
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    (tmp_path / "bad.txt").write_text("张 B-PER\n三\n", encoding="utf8")
    result = CliRunner().invoke(app, ["convert", str(tmp_path / "bad.txt"), str(tmp_path / "out.spacy")])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "rerun with --repair to" in said and "repair=True" not in said, said
