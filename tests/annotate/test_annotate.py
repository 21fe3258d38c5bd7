"""`python -m spacy_cner annotate`: formats, bad rows, resuming, and the Ray engine (local Ray)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import catalogue
import numpy
import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_cner.annotate import (
    AnnotateJob,
    annotate,
    find_sources,
    iter_lines,
    msgpack_hooks_looked_up_once,
    read_rows,
)
from spacy_cner.cli import app

from conftest import trained_pipeline

runner = CliRunner()
TEXTS = ["我在北京", "北京很大", "你好", "", "他从北京来到北京"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("annotate") / "model"
    trained_pipeline(path)
    return path


def read_jsonl(folder: Path):
    """Every output row, shards in name order."""
    rows = []
    for path in sorted(folder.rglob("*.jsonl")):
        lines = path.read_bytes().decode("utf8").split("\n")
        assert lines[-1] == "" and all("\u2028" not in line for line in lines)
        rows.extend(json.loads(line) for line in lines[:-1])
    return rows


def expected_entities(model, texts):
    nlp = spacy.load(model)
    return [[(ent.start_char, ent.end_char, ent.label_, ent.text) for ent in doc.ents] for doc in nlp.pipe(texts)]


def entity_tuples(row):
    return [(e["start"], e["end"], e["label"], e["text"]) for e in row["entities"]]


def test_annotate_text_file_keeps_every_line_and_scores(model, tmp_path):
    # "\r\n" ends a line; a lone "\r" and U+2028 inside a line do not split it.
    texts = TEXTS + ["北京\r北京", "北京\u2028北京"]
    source = tmp_path / "docs.txt"
    source.write_bytes("\r\n".join(texts).encode("utf8") + b"\n")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out", shard_size=3)
    rows = read_jsonl(tmp_path / "out")
    assert [row["text"] for row in rows] == texts
    assert [entity_tuples(row) for row in rows] == expected_entities(model, texts)
    assert any(row["entities"] for row in rows)
    scores = [e["score"] for row in rows for e in row["entities"]]
    assert all(0.0 < score <= 1.0 + 1e-6 for score in scores)
    assert sorted(p.name for p in (tmp_path / "out").glob("*.jsonl")) == [
        "docs.00000.jsonl",
        "docs.00001.jsonl",
        "docs.00002.jsonl",
    ]
    assert (summary.docs, summary.errors, summary.shards_written, summary.shards_skipped) == (7, 0, 3, 0)
    assert summary.chars == sum(len(text) for text in texts)


def test_annotate_n_process_2_matches_one_process(model, tmp_path):
    """Workers send docs back through srsly's msgpack: same rows, same entities and scores."""
    texts = TEXTS * 3
    (tmp_path / "docs.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    annotate(AnnotateJob(str(model)), str(tmp_path / "docs.txt"), tmp_path / "one", shard_size=4)
    summary = annotate(
        AnnotateJob(str(model), n_process=2, batch_size=2), str(tmp_path / "docs.txt"), tmp_path / "two", shard_size=4
    )
    two, one = read_jsonl(tmp_path / "two"), read_jsonl(tmp_path / "one")

    def scores(rows):  # the same up to float rounding, as docs/annotate.md says (the last digit moved with the
        # memory layout the earlier tests left: batches of 2 in workers against one batch here)
        return [entity.pop("score") for row in rows for entity in row["entities"]]

    assert scores(two) == pytest.approx(scores(one), rel=1e-9) and two == one
    assert summary.docs == len(texts)
    assert "get_all" not in vars(srsly.msgpack_decoders)


def test_msgpack_hooks_looked_up_once(monkeypatch):
    """Inside the block srsly's hooks (numpy's among them) still apply, without a registry lookup per call."""
    calls = []
    lookup = catalogue.Registry.get_all
    monkeypatch.setattr(catalogue.Registry, "get_all", lambda self: calls.append(self.namespace) or lookup(self))
    array = numpy.arange(6, dtype="float32").reshape(2, 3)
    with msgpack_hooks_looked_up_once():
        assert len(calls) == 2
        for _ in range(3):
            assert numpy.array_equal(srsly.msgpack_loads(srsly.msgpack_dumps({"a": array}))["a"], array)
        assert len(calls) == 2
    assert "get_all" not in vars(srsly.msgpack_encoders) and "get_all" not in vars(srsly.msgpack_decoders)
    srsly.msgpack_loads(srsly.msgpack_dumps({"a": array}))
    assert len(calls) == 4


def test_annotate_jsonl_carries_fields_and_reports_bad_rows(model, tmp_path):
    lines = [
        json.dumps({"id": 1, "text": "我在北京", "meta": {"source": "a"}}, ensure_ascii=False),
        json.dumps({"id": 2}),
        "{not json",
        json.dumps({"id": 3, "text": 5}),
        json.dumps(["我在北京"], ensure_ascii=False),
        json.dumps({"id": 4, "text": "北" * (10**6 + 1)}, ensure_ascii=False),  # nlp.max_length is 10**6
        json.dumps({"id": 5, "text": "北京", "entities": []}, ensure_ascii=False),
        json.dumps({"id": 6, "text": "北京很大"}, ensure_ascii=False),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out")
    rows = read_jsonl(tmp_path / "out")
    assert len(rows) == len(lines)
    assert rows[0]["id"] == 1 and rows[0]["meta"] == {"source": "a"} and "error" not in rows[0]
    assert entity_tuples(rows[0]) == expected_entities(model, ["我在北京"])[0]
    errors = {number: row["error"] for number, row in enumerate(rows, start=1) if "error" in row}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7]
    assert all(f"{source}, line {number}:" in error for number, error in errors.items())
    assert "no 'text' field" in errors[2] and "not JSON" in errors[3] and "not a string" in errors[4]
    assert "nlp.max_length" in errors[6] and "'entities'" in errors[7]
    assert rows[2]["raw"] == "{not json" and rows[5]["text"] == "北" * (10**6 + 1)  # nothing of a bad row is lost
    assert rows[7]["id"] == 6 and "entities" in rows[7]
    assert (summary.docs, summary.errors) == (2, 6)


def test_lone_surrogates_are_bad_rows_not_a_stopped_job(model, tmp_path):
    """A \\ud800 escape in the text or in any other field (nested too) is that row's error, naming
    the field and character; the line is kept as it was read, and the other rows are annotated."""
    lines = [
        '{"id": 1, "text": "我在北京"}',
        '{"id": 2, "text": "李四\\ud800在上海"}',
        '{"id": 3, "text": "北京", "meta": {"tags": ["ok", "\\udc00"]}}',
        '{"id": 4, "text": "北京很大"}',
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out")
    rows = read_jsonl(tmp_path / "out")
    assert [row.get("id") for row in rows] == [1, None, None, 4] and (summary.docs, summary.errors) == (2, 2)
    assert rows[1]["raw"] == lines[1] and rows[2]["raw"] == lines[2]
    assert rows[1]["error"] == (
        f"{source}, line 2: field 'text' has a lone surrogate '\\ud800' at character 2: "
        "not valid Unicode text (fix the escape, or replace it with U+FFFD)"
    )
    assert rows[2]["error"].startswith(f"{source}, line 3: field 'meta'['tags'][1] has a lone surrogate '\\udc00'")


@pytest.mark.parametrize("output_format", ["jsonl", "parquet", "spacy"])
def test_rows_an_output_format_cannot_hold_are_bad_rows(model, tmp_path, output_format):
    """JSON nested past the recursion limit, an integer beyond 64 bits, a field whose type differs from
    the shard's other rows: each is that row's error (kept as read), never a stopped job."""
    if output_format == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install 'spacy-cner[ray]')")
    deep = '{"text": "李四", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lines = [
        json.dumps({"text": "我在北京", "n": 1}),
        deep,
        json.dumps({"text": "北京", "n": 10**30}),
        json.dumps({"text": "北京很大", "n": "two"}, ensure_ascii=False),
        json.dumps({"text": "上海", "n": 3}),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out", output_format=output_format)
    if output_format == "parquet":
        import pyarrow.parquet

        rows = pyarrow.parquet.read_table(tmp_path / "out" / "in.00000.parquet").to_pylist()
    elif output_format == "spacy":
        docs = list(DocBin().from_disk(tmp_path / "out" / "in.00000.spacy").get_docs(spacy.blank("zh").vocab))
        rows = [{**doc.user_data["fields"], "error": doc.user_data.get("error")} for doc in docs]
    else:
        rows = read_jsonl(tmp_path / "out")
    assert len(rows) == len(lines)
    errors = {i + 1: row["error"] for i, row in enumerate(rows) if row.get("error")}
    assert errors[2].startswith(f"{source}, line 2: JSON nested too deeply") and rows[1]["raw"] == deep
    if output_format == "jsonl":  # JSON holds any of them
        assert sorted(errors) == [2] and (summary.docs, summary.errors) == (4, 1)
    else:
        assert errors[3].startswith(f"{source}, line 3: a ") and json.loads(rows[2]["raw"])["n"] == 10**30
        if output_format == "parquet":  # "two" beside the integers of the rows before it
            assert sorted(errors) == [2, 3, 4] and json.loads(rows[3]["raw"])["n"] == "two"
        assert summary.errors == len(errors) and summary.docs == len(lines) - len(errors)
    assert rows[0]["text"] == "我在北京" and rows[-1]["text"] == "上海"


def test_parquet_values_json_has_no_form_for_are_written_in_json_forms(model, tmp_path):
    """Timestamp, date, time, duration, decimal and binary columns stopped annotate and select with JSONL
    output (TypeError: not JSON serializable), at the same shard on every rerun: they are written as ISO
    8601 strings, seconds, the decimal's str and base64 text (DocBin fields too); Parquet output keeps
    their types."""
    import base64
    import datetime
    import decimal

    pyarrow = pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install 'spacy-cner[ray]')")
    import pyarrow.parquet  # noqa: F811  (the submodule, on the module importorskip gave)

    from spacy_cner.annotate.job import AnnotateJob
    from spacy_cner.annotate.select import select

    when = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    table = pyarrow.table(
        {
            "text": ["我在北京", "北京很大"],
            "when": pyarrow.array([when, None], pyarrow.timestamp("us", tz="UTC")),
            "day": pyarrow.array([datetime.date(2024, 1, 2), datetime.date(2023, 12, 31)]),
            "at": pyarrow.array([datetime.time(12, 30), datetime.time(0, 0, 1)]),
            "took": pyarrow.array([datetime.timedelta(seconds=90), datetime.timedelta(milliseconds=5)]),
            "price": pyarrow.array(
                [decimal.Decimal("1.10"), decimal.Decimal("12345678901234567890.01")], pyarrow.decimal128(22, 2)
            ),
            "blob": pyarrow.array([b"\x00\xff", b"ab"], pyarrow.binary()),
        }
    )
    source = tmp_path / "in.parquet"
    pyarrow.parquet.write_table(table, source)
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out")
    rows = read_jsonl(tmp_path / "out")
    assert (summary.docs, summary.errors) == (2, 0)
    assert [{k: v for k, v in row.items() if k != "entities"} for row in rows] == [
        {
            "text": "我在北京",
            "when": "2024-01-02T03:04:05+00:00",
            "day": "2024-01-02",
            "at": "12:30:00",
            "took": 90.0,
            "price": "1.10",
            "blob": base64.b64encode(b"\x00\xff").decode(),
        },
        {
            "text": "北京很大",
            "when": None,
            "day": "2023-12-31",
            "at": "00:00:01",
            "took": 0.005,
            "price": "12345678901234567890.01",
            "blob": "YWI=",
        },
    ]
    assert [entity_tuples(row) for row in rows] == expected_entities(model, ["我在北京", "北京很大"])
    annotate(AnnotateJob(str(model)), str(source), tmp_path / "docbin", output_format="spacy")
    docs = list(DocBin().from_disk(tmp_path / "docbin" / "in.00000.spacy").get_docs(spacy.blank("zh").vocab))
    assert [doc.user_data["fields"]["price"] for doc in docs] == ["1.10", "12345678901234567890.01"]
    assert "error" not in docs[0].user_data
    annotate(AnnotateJob(str(model)), str(source), tmp_path / "parquet", output_format="parquet")
    kept = pyarrow.parquet.read_table(tmp_path / "parquet" / "in.00000.parquet")
    assert kept.column("when").to_pylist() == [when, None] and kept.schema.field("blob").type == pyarrow.binary()
    select(AnnotateJob(str(model)), str(source), 2, tmp_path / "next.jsonl")
    chosen = [json.loads(line) for line in (tmp_path / "next.jsonl").read_text(encoding="utf8").splitlines()]
    assert sorted(row["price"] for row in chosen) == ["1.10", "12345678901234567890.01"]


def test_nan_and_infinities_are_written_as_null_never_nan(model, tmp_path):
    """NaN and infinities (a JSONL input's NaN literal, a Parquet double column's NaN) were written as
    NaN and Infinity, which JSON readers refuse; JSONL output writes null."""

    def strict(constant):
        raise ValueError(f"{constant} is not JSON")

    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "我在北京", "x": NaN, "y": [Infinity, 1.5], "z": {"w": -Infinity}}\n', encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out")
    (line,) = (tmp_path / "out" / "in.00000.jsonl").read_text(encoding="utf8").splitlines()
    row = json.loads(line, parse_constant=strict)
    assert (row["x"], row["y"], row["z"]) == (None, [None, 1.5], {"w": None}) and summary.errors == 0
    assert entity_tuples(row) == expected_entities(model, ["我在北京"])[0]


def test_a_row_nested_too_deeply_for_parquet_is_a_bad_row_not_an_unreadable_shard(model, tmp_path):
    """A row nested past Parquet's 100 schema levels (lists take two) made its whole output shard
    unreadable ("Parquet schema too deeply nested"); it is now that row's error, the shard readable."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install 'spacy-cner[ray]')")
    import pyarrow.parquet

    deep = {"text": "李四", "x": json.loads("[" * 60 + "1" + "]" * 60)}
    lines = [
        json.dumps({"text": "我在北京"}, ensure_ascii=False),
        json.dumps(deep, ensure_ascii=False),
        json.dumps({"text": "上海", "x": [[1]]}, ensure_ascii=False),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out", output_format="parquet")
    rows = pyarrow.parquet.read_table(tmp_path / "out" / "in.00000.parquet").to_pylist()
    assert [row["text"] for row in rows] == ["我在北京", None, "上海"] and rows[2]["x"] == [[1]]
    assert rows[1]["error"].startswith(f"{source}, line 2: nested too deeply for a Parquet reader")
    raw = json.loads(rows[1]["raw"])  # the record as annotated
    assert raw["x"] == deep["x"] and "entities" in raw and (summary.docs, summary.errors) == (2, 1)


def test_annotate_parquet_in_and_out(model, tmp_path):
    pyarrow = pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install 'spacy-cner[ray]')")
    import pyarrow.parquet  # noqa: F811  (the submodule, on the module importorskip gave)

    table = pyarrow.table({"doc_id": ["a", "b", "c"], "text": ["我在北京", None, "北京很大"]})
    pyarrow.parquet.write_table(table, tmp_path / "in.parquet")
    annotate(AnnotateJob(str(model)), str(tmp_path / "in.parquet"), tmp_path / "out", output_format="parquet")
    rows = pyarrow.parquet.read_table(tmp_path / "out" / "in.00000.parquet").to_pylist()
    assert [row["doc_id"] for row in rows] == ["a", "b", "c"]
    assert "row 2" in rows[1]["error"] and rows[0]["error"] is None
    assert [entity_tuples(row) for row in (rows[0], rows[2])] == expected_entities(model, ["我在北京", "北京很大"])


def test_annotate_docbin_output(model, tmp_path):
    (tmp_path / "in.jsonl").write_text(
        json.dumps({"id": 7, "text": "我在北京"}, ensure_ascii=False) + "\n" + json.dumps({"id": 8}) + "\n",
        encoding="utf8",
    )
    annotate(AnnotateJob(str(model)), str(tmp_path / "in.jsonl"), tmp_path / "out", output_format="spacy")
    nlp = spacy.load(model)
    docs = list(DocBin().from_disk(tmp_path / "out" / "in.00000.spacy").get_docs(nlp.vocab))
    assert [doc.text for doc in docs] == ["我在北京", ""]
    assert [(e.text, e.label_) for e in docs[0].ents] == [
        (t, label) for _, _, label, t in expected_entities(model, ["我在北京"])[0]
    ]
    assert docs[0].user_data["fields"] == {"id": 7, "text": "我在北京"}
    assert "line 2" in docs[1].user_data["error"] and docs[1].user_data["fields"] == {"id": 8}


def test_annotate_resumes_without_losing_or_duplicating(model, tmp_path):
    texts = [f"{i}我在北京" for i in range(10)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("\n".join(texts[:7]) + "\n", encoding="utf8")
    (tmp_path / "in" / "b.txt").write_text("\n".join(texts[7:]) + "\n", encoding="utf8")
    out = tmp_path / "out"
    annotate(AnnotateJob(str(model)), str(tmp_path / "in"), out, shard_size=3)
    complete = read_jsonl(out)
    # A killed run: a.txt's last shard and b.txt's marker lost, a temporary file left behind.
    (out / "a.00002.jsonl").unlink()
    (out / ".annotate" / "done" / "a.json").unlink()
    (out / ".annotate" / "done" / "b.json").unlink()
    (out / ".a.00002.jsonl.123.tmp").write_text("{half", encoding="utf8")
    before = {p: p.stat().st_mtime_ns for p in out.glob("*.jsonl")}
    summary = annotate(AnnotateJob(str(model)), str(tmp_path / "in"), out, shard_size=3)
    assert read_jsonl(out) == complete
    assert [row["text"] for row in complete] == texts
    assert summary.shards_written == 1 and summary.shards_skipped == 3 and summary.docs == 1
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in before.items())
    again = annotate(AnnotateJob(str(model)), str(tmp_path / "in"), out, shard_size=3)
    assert (again.shards_written, again.shards_skipped, again.docs) == (0, 4, 0)
    with pytest.raises(ValueError, match="shard_size"):
        annotate(AnnotateJob(str(model)), str(tmp_path / "in"), out, shard_size=4)
    # A new input file later: only its shards are written.
    (tmp_path / "in" / "c.txt").write_text("我在北京\n", encoding="utf8")
    more = annotate(AnnotateJob(str(model)), str(tmp_path / "in"), out, shard_size=3)
    assert (more.shards_written, more.shards_skipped, more.docs) == (1, 4, 1)
    assert [row["text"] for row in read_jsonl(out)] == texts + ["我在北京"]


def test_resume_with_another_model_at_the_same_path_is_refused(model, tmp_path):
    """The folder records the model's files' fingerprint, not only its path: a pipeline replaced at
    the same path would mix two models' outputs, and is refused."""
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    (tmp_path / "in.txt").write_text("我在北京\n北京很大\n", encoding="utf8")
    annotate(AnnotateJob(str(copy)), str(tmp_path / "in.txt"), tmp_path / "out", shard_size=1)
    (tmp_path / "out" / "in.00001.jsonl").unlink()  # a killed run: its last shard lost
    (tmp_path / "out" / ".annotate" / "done" / "in.json").unlink()
    original = (copy / "meta.json").read_bytes()
    meta = json.loads(original)
    (copy / "meta.json").write_text(json.dumps({**meta, "version": "9.9.9"}), encoding="utf8")
    with pytest.raises(ValueError, match="model_fingerprint: '[0-9a-f]{16}' then, '[0-9a-f]{16}' now"):
        annotate(AnnotateJob(str(copy)), str(tmp_path / "in.txt"), tmp_path / "out", shard_size=1)
    (copy / "meta.json").write_bytes(original)  # the same files again: resumes
    assert (
        annotate(AnnotateJob(str(copy)), str(tmp_path / "in.txt"), tmp_path / "out", shard_size=1).shards_written == 1
    )


def test_resume_edge_cases(model, tmp_path):
    """The output folder inside the input folder is not input; lines appended to a finished input are
    annotated on the next run (its partial last shard written again); an input edited since is
    refused, as is another --input-format; a damaged state file names itself."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("1我在北京\n2北京很大\n3上海\n", encoding="utf8")
    out = data / "out"
    annotate(AnnotateJob(str(model)), str(data), out, shard_size=2)
    again = annotate(AnnotateJob(str(model)), str(data), out, shard_size=2)  # out/*.jsonl are not read as input
    assert (again.shards_written, again.shards_skipped) == (0, 2)
    with (data / "a.txt").open("a", encoding="utf8") as file:
        file.write("4我在上海\n5北京\n")
    more = annotate(AnnotateJob(str(model)), str(data), out, shard_size=2)
    assert (more.docs, more.shards_written) == (3, 2)  # rows 3-5: the partial shard again, and a new one
    assert [row["text"] for row in read_jsonl(out)] == ["1我在北京", "2北京很大", "3上海", "4我在上海", "5北京"]
    (data / "a.txt").write_text("1我在北京\n2北京很小\n3上海\n4我在上海\n5北京\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"a\.txt changed since its shards .* were written"):
        annotate(AnnotateJob(str(model)), str(data), out, shard_size=2)
    with pytest.raises(ValueError, match="input_format: 'auto' then, 'txt' now"):
        annotate(AnnotateJob(str(model)), str(data), out, shard_size=2, input_format="txt")
    (out / ".annotate" / "settings.json").write_text('{"model": "x", "shard_', encoding="utf8")
    with pytest.raises(ValueError, match=r"settings\.json is damaged .*delete it"):
        annotate(AnnotateJob(str(model)), str(data), out, shard_size=2)


def test_resume_after_an_input_changed_is_exact_or_refused(model, tmp_path):
    """A killed run resumed after its input changed: a line inserted at the top is refused, naming the
    file (its shards came from the old content: 26 rows for 26 lines before, one dropped, one twice);
    lines appended resume to exactly what one run gives; an edited file whose size stayed is refused."""
    texts = [f"{i}我在北京" for i in range(25)]
    source = tmp_path / "a.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf8")
    out = tmp_path / "out"

    def killed_run():
        annotate(AnnotateJob(str(model)), str(source), out, shard_size=5)
        for shard in ("a.00003.jsonl", "a.00004.jsonl"):
            (out / shard).unlink()
        (out / ".annotate" / "done" / "a.json").unlink()

    killed_run()
    source.write_text("\n".join(["新的一行"] + texts) + "\n", encoding="utf8")
    with pytest.raises(
        ValueError, match=r"a\.txt changed since its shards in .*out were written .* To start over, delete"
    ):
        annotate(AnnotateJob(str(model)), str(source), out, shard_size=5)
    assert len(read_jsonl(out)) == 15  # nothing written from the new content
    source.write_text("\n".join(texts) + "\n", encoding="utf8")  # the old content again: resumes
    with source.open("a", encoding="utf8") as file:
        file.write("25上海\n")
    resumed = annotate(AnnotateJob(str(model)), str(source), out, shard_size=5)
    assert (resumed.shards_skipped, resumed.docs) == (3, 11)
    assert [row["text"] for row in read_jsonl(out)] == texts + ["25上海"]
    # The same size, another byte: the hash tells, not the size (nor the mtime, set back).
    shutil.rmtree(out)
    killed_run()
    stat = source.stat()
    source.write_bytes(source.read_bytes().replace("0我在北京".encode("utf8"), "0我在上海".encode("utf8")))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ValueError, match=r"a\.txt changed since its shards"):
        annotate(AnnotateJob(str(model)), str(source), out, shard_size=5)


def test_lines_appended_to_a_last_line_without_its_break_annotate_it_again(model, tmp_path):
    """A finished input whose last line had no line break, then appended to: that line grew, so the
    (full) shard holding it is written again, as one run over the new content would write it."""
    source = tmp_path / "a.txt"
    source.write_text("1我在北京\n2北京", encoding="utf8")
    annotate(AnnotateJob(str(model)), str(source), tmp_path / "out", shard_size=2)
    with source.open("a", encoding="utf8") as file:
        file.write("很大\n3上海\n")
    annotate(AnnotateJob(str(model)), str(source), tmp_path / "out", shard_size=2)
    assert [row["text"] for row in read_jsonl(tmp_path / "out")] == ["1我在北京", "2北京很大", "3上海"]


def test_annotate_inputs_and_errors(model, tmp_path):
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "x.txt").write_text("北京\n", encoding="utf8")
    (tmp_path / "in" / "sub" / "x.txt").write_text("北京\n", encoding="utf8")
    assert [s.name for s in find_sources(str(tmp_path / "in"))] == ["sub/x", "x"]
    assert [s.name for s in find_sources(str(tmp_path / "in" / "**" / "*.txt"))] == ["sub/x", "x"]
    with pytest.raises(ValueError, match="No input files"):
        find_sources(str(tmp_path / "nothing" / "*.txt"))
    (tmp_path / "odd.log").write_text("a\n", encoding="utf8")
    with pytest.raises(ValueError, match="--input-format"):
        find_sources(str(tmp_path / "odd.log"))
    assert find_sources(str(tmp_path / "odd.log"), "txt")[0].format == "txt"
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "北京"}\n', encoding="utf8")
    with pytest.raises(ValueError, match="would write the same output shards"):
        find_sources(str(tmp_path / "in"))
    (tmp_path / "in" / "x.jsonl").unlink()
    annotate(AnnotateJob(str(model)), str(tmp_path / "in"), tmp_path / "out")
    assert len(read_jsonl(tmp_path / "out" / "sub")) == 1 and (tmp_path / "out" / "x.00000.jsonl").exists()
    assert list(iter_lines(__import__("io").BytesIO(b"\xef\xbb\xbfa\r\nb\rc\n\nd"))) == [b"a", b"b\rc", b"", b"d"]


def test_annotate_command(model, tmp_path):
    (tmp_path / "in.txt").write_text("我在北京\n\xff\n".replace("\xff", "你好"), encoding="utf8")
    with (tmp_path / "in.txt").open("ab") as file:
        file.write(b"\xff\xfe\n")
    result = runner.invoke(app, ["annotate", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "2 docs" in result.output and "1 rows could not be annotated" in result.output
    rows = read_jsonl(tmp_path / "out")
    assert "not UTF-8" in rows[2]["error"] and rows[2]["raw"] == "\\xff\\xfe" and len(rows) == 3
    bad = runner.invoke(app, ["annotate", str(model), str(tmp_path / "missing.txt"), str(tmp_path / "out2"), "-q"])
    assert bad.exit_code == 1 and "No input files" in bad.output
    unused = runner.invoke(
        app, ["annotate", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out3"), "-q", "--workers", "4"]
    )
    assert unused.exit_code == 1 and "--workers is not used by the local engine: add --engine ray" in unused.output
    with pytest.raises(ValueError, match="--n-process, --gpu-id are not used by the ray engine"):
        annotate(
            AnnotateJob(str(model), engine="ray", n_process=2, gpu_id=0), str(tmp_path / "in.txt"), tmp_path / "out4"
        )


def test_annotate_never_writes_into_an_input_file_or_a_folder_it_did_not_make(model, tmp_path):
    """The output named as an input file, below a file, or a folder of other files: refused in one line,
    nothing written; its own earlier folder and an empty one are fine."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("我在北京\n", encoding="utf8")
    (data / "b.txt").write_text("北京很大\n", encoding="utf8")
    others = tmp_path / "others"
    others.mkdir()
    (others / "a.00000.jsonl").write_text("mine\n", encoding="utf8")
    for output, said in (
        (data / "a.txt", "a.txt is a file, not a folder"),
        (data / "a.txt" / "out", "a.txt is a file, not a folder"),
        (others, "holds files annotate did not write"),
    ):
        result = runner.invoke(app, ["annotate", str(model), str(data), str(output), "-q"])
        text = " ".join(result.output.split())
        assert result.exit_code == 1 and said in text and text.count("✘") == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
    assert (data / "a.txt").read_text(encoding="utf8") == "我在北京\n"
    assert sorted(p.name for p in data.iterdir()) == ["a.txt", "b.txt"]
    assert [p.name for p in others.iterdir()] == ["a.00000.jsonl"]
    (tmp_path / "empty").mkdir()
    assert annotate(AnnotateJob(str(model)), str(data), tmp_path / "empty").docs == 2
    assert annotate(AnnotateJob(str(model)), str(data), tmp_path / "empty").shards_skipped == 2


def test_annotate_and_select_refuse_batch_size_0_and_unwritable_outputs(model, tmp_path):
    """--batch-size 0 (which annotated nothing and exited 0) and an output that cannot be written: exit 1,
    one line, no traceback."""
    (tmp_path / "in.txt").write_text("我在北京\n", encoding="utf8")
    unwritable = Path("/sys/spacy_cner_test")
    for command, said in (
        (
            ["annotate", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out"), "--batch-size", "0"],
            "batch_size must be at least 1",
        ),
        (
            [
                "select",
                str(model),
                str(tmp_path / "in.txt"),
                "-n",
                "1",
                "-o",
                str(tmp_path / "next.jsonl"),
                "--batch-size",
                "0",
            ],
            "batch_size must be at least 1",
        ),
        (["annotate", str(model), str(tmp_path / "in.txt"), str(unwritable / "out")], "spacy_cner_test"),
        (
            ["select", str(model), str(tmp_path / "in.txt"), "-n", "1", "-o", str(unwritable / "next.jsonl")],
            "spacy_cner_test",
        ),
    ):
        result = runner.invoke(app, command + ["-q"])
        text = " ".join(result.output.split())
        assert result.exit_code == 1 and said in text and text.count("✘") == 1, result.output
        assert isinstance(result.exception, SystemExit)
    assert not (tmp_path / "out").exists() and not (tmp_path / "next.jsonl").exists()


def test_n_process_0_is_one_line_naming_the_setting(model, tmp_path):
    """Issue 85: --n-process 0 said "not enough values to unpack" (spaCy's nlp.pipe with no worker)."""
    (tmp_path / "in.txt").write_text("我在北京\n", encoding="utf8")
    for command in (
        ["annotate", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out")],
        ["select", str(model), str(tmp_path / "in.txt"), "-n", "1", "-o", str(tmp_path / "next.jsonl")],
    ):
        result = runner.invoke(app, command + ["--n-process", "0", "-q"])
        said = " ".join(result.output.split())
        assert result.exit_code == 1 and said.count("✘") == 1, result.output
        assert "n_process must be at least 1 (nlp.pipe processes), or -1 for one per CPU, not 0." in said
    assert not (tmp_path / "out").exists() and not (tmp_path / "next.jsonl").exists()


ray = pytest.importorskip(
    "ray", reason="the Ray engine tests need Ray Data: pip install 'spacy-cner[ray]' (CI installs it)"
)


def test_ray_address_with_no_cluster_is_one_line(model, tmp_path, monkeypatch):
    """--address auto with no cluster running: one line naming the address, for annotate and select."""

    def no_cluster(*args, **kwargs):  # what ray.init(address="auto") raises with no cluster running
        raise ConnectionError(
            "Could not find any running Ray instance. Please specify the one to connect to "
            "by setting `--address` flag or `RAY_ADDRESS` environment variable."
        )

    monkeypatch.setattr(ray, "init", no_cluster)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    (tmp_path / "in.txt").write_text("我在北京\n", encoding="utf8")
    for command in (
        ["annotate", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out")],
        ["select", str(model), str(tmp_path / "in.txt"), "-n", "1", "-o", str(tmp_path / "next.jsonl")],
    ):
        result = runner.invoke(app, command + ["--engine", "ray", "--address", "auto", "-q"])
        said = " ".join(result.output.split())
        assert result.exit_code == 1 and said.count("✘") == 1, result.output
        assert "Cannot join the Ray cluster at --address auto (Could not find any running Ray instance." in said
        assert "ray start --head" in said and isinstance(result.exception, SystemExit)


@pytest.fixture(scope="module")
def local_ray():
    # Ray runs its workers at niceness 15: beside other busy processes (a parallel test run) they would
    # barely start. The tests want them at the same priority as the test process.
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_matches_local_run(model, tmp_path, local_ray):
    lines = [json.dumps({"id": i, "text": TEXTS[i % len(TEXTS)]}, ensure_ascii=False) for i in range(40)]
    lines[5] = "{bad"
    lines[9] = json.dumps({"id": 9})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(lines[:25]) + "\n", encoding="utf8")
    (tmp_path / "in" / "b.jsonl").write_text("\n".join(lines[25:]) + "\n", encoding="utf8")
    (tmp_path / "in" / "empty.jsonl").write_text("", encoding="utf8")
    local = annotate(AnnotateJob(str(model)), str(tmp_path / "in"), tmp_path / "local", shard_size=10)
    remote = annotate(
        AnnotateJob(str(model), engine="ray", workers=2, batch_size=4),
        str(tmp_path / "in"),
        tmp_path / "ray",
        shard_size=10,
    )
    ray_rows, local_rows = read_jsonl(tmp_path / "ray"), read_jsonl(tmp_path / "local")

    def scores(rows):  # the same up to float rounding (batches of 4 on the actors against one batch here)
        return [entity.pop("score") for row in rows for entity in row.get("entities", [])]

    assert scores(ray_rows) == pytest.approx(scores(local_rows), rel=1e-9) and ray_rows == local_rows
    assert len(read_jsonl(tmp_path / "ray")) == 40
    assert (
        (remote.docs, remote.errors, remote.shards_written)
        == (local.docs, local.errors, local.shards_written)
        == (38, 2, 5)
    )
    assert (tmp_path / "ray" / ".annotate" / "done" / "empty.json").exists()


def test_ray_select_matches_local(model, tmp_path, local_ray):
    """select scores on Ray's actors as in this process: the same texts, scores and bad rows."""
    from spacy_cner.annotate.job import AnnotateJob
    from spacy_cner.annotate.select import select

    lines = [json.dumps({"id": i, "text": TEXTS[i % len(TEXTS)] + str(i)}, ensure_ascii=False) for i in range(30)]
    lines[4] = "{bad"
    (tmp_path / "pool.jsonl").write_text("\n".join(lines) + "\n", encoding="utf8")
    picks = {}
    for engine, options in (("local", {}), ("ray", {"workers": 2})):
        out = tmp_path / f"{engine}.jsonl"
        summary = select(
            AnnotateJob(str(model), batch_size=4, engine=engine, **options),
            str(tmp_path / "pool.jsonl"),
            8,
            out,
            strategy="entropy",
            shard_size=7,
        )
        assert (summary.texts, summary.errors, summary.selected) == (29, 1, 8)
        picks[engine] = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
        assert "line 5: not JSON" in (tmp_path / f"{engine}.jsonl.errors.jsonl").read_text(encoding="utf8")
    assert [r["id"] for r in picks["ray"]] == [r["id"] for r in picks["local"]]
    assert [r["select"]["score"] for r in picks["ray"]] == pytest.approx([r["select"]["score"] for r in picks["local"]])


def test_ray_text_and_parquet(model, tmp_path, local_ray):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet  # noqa: F811  (the submodule, on the module importorskip gave)

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "in.txt").write_bytes("\r\n".join(TEXTS + ["北京\u2028北京"]).encode("utf8"))
    annotate(AnnotateJob(str(model)), str(tmp_path / "t"), tmp_path / "local", shard_size=3)
    annotate(AnnotateJob(str(model), engine="ray"), str(tmp_path / "t"), tmp_path / "ray", shard_size=3)
    assert read_jsonl(tmp_path / "ray") == read_jsonl(tmp_path / "local") and len(read_jsonl(tmp_path / "ray")) == 6
    (tmp_path / "p").mkdir()
    pyarrow.parquet.write_table(
        pyarrow.table({"n": [1, 2, 3], "text": ["我在北京", "北京很大", None]}), tmp_path / "p" / "in.parquet"
    )
    annotate(AnnotateJob(str(model)), str(tmp_path / "p"), tmp_path / "pl", output_format="parquet")
    annotate(AnnotateJob(str(model), engine="ray"), str(tmp_path / "p"), tmp_path / "pr", output_format="parquet")
    local_rows = pyarrow.parquet.read_table(tmp_path / "pl" / "in.00000.parquet").to_pylist()
    assert pyarrow.parquet.read_table(tmp_path / "pr" / "in.00000.parquet").to_pylist() == local_rows
    assert (
        local_rows[2]["error"].endswith("'text' is a NoneType, not a string")
        or "not a string" in local_rows[2]["error"]
    )


def _actor_pids():
    """PIDs of the Ray Data actors running RayAnnotator (their process titles name the class)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"MapWorker" in cmdline and b"RayAnnotator" in cmdline:
                pids.append(int(entry))
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the actor's process through /proc (Linux)")
def test_ray_survives_a_killed_actor(model, tmp_path, local_ray):
    texts = [f"{i}我在北京，北京很大" for i in range(3000)]
    (tmp_path / "in").mkdir()
    for part in range(3):
        (tmp_path / "in" / f"{part}.txt").write_text(
            "\n".join(texts[part * 1000 : (part + 1) * 1000]) + "\n", encoding="utf8"
        )
    killed = []
    done = threading.Event()

    def kill_one_actor():  # until the job ends, however long a busy machine makes it take
        # As soon as an actor runs: the shards are written near the end of the job (measured: the
        # first at 11.4 s of 11.7), too late to wait for one.
        while not done.is_set() and not killed:
            pids = _actor_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(time.time())
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_actor)
    killer.start()
    try:
        summary = annotate(
            AnnotateJob(str(model), engine="ray", workers=2, batch_size=8),
            str(tmp_path / "in"),
            tmp_path / "out",
            shard_size=250,
        )
    finally:
        finished = time.time()
        done.set()
        killer.join()
    assert killed and killed[0] < finished, "no actor was killed while the job ran"
    assert len(list((tmp_path / "out").glob("*.jsonl"))) == 12
    rows = read_jsonl(tmp_path / "out")
    assert [row["text"] for row in rows] == texts
    assert summary.docs == 3000 and summary.errors == 0
    expected = expected_entities(model, texts[:5])
    assert [entity_tuples(row) for row in rows[:5]] == expected


def test_annotate_speed_leaves_out_loading_the_pipeline(model, tmp_path, monkeypatch):
    """The chars/s the command prints are the annotation's: a slow spacy.load does not lower them."""
    import time

    import spacy

    load = spacy.load

    def slow_load(*args, **kwargs):
        time.sleep(0.5)
        return load(*args, **kwargs)

    monkeypatch.setattr(spacy, "load", slow_load)
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    summary = annotate(AnnotateJob(str(model)), str(source), tmp_path / "out")
    assert summary.load_seconds >= 0.5
    assert summary.seconds - summary.load_seconds < summary.seconds
    assert summary.chars_per_second == pytest.approx(summary.chars / (summary.seconds - summary.load_seconds))
    assert summary.to_dict()["load_seconds"] == summary.load_seconds


def test_a_failed_start_does_not_lock_the_output_folder(model, tmp_path, monkeypatch):
    """A mistyped model path or Parquet without pyarrow fails in one clear error, and the corrected
    command then runs in the same folder (settings bind only once a shard is written)."""
    import sys

    source = tmp_path / "docs.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="Cannot load the pipeline .*no_such_model"):
        annotate(AnnotateJob(str(tmp_path / "no_such_model")), str(source), out)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    with pytest.raises(ValueError, match=r"spacy-cner\[parquet\]"):
        annotate(AnnotateJob(str(model)), str(source), out, output_format="parquet")
    monkeypatch.delitem(sys.modules, "pyarrow")
    summary = annotate(AnnotateJob(str(model)), str(source), out)
    assert summary.docs == len(TEXTS)
    # Once shards exist, other settings are refused as before.
    with pytest.raises(ValueError, match="other settings"):
        annotate(AnnotateJob(str(model)), str(source), out, shard_size=2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_when_the_annotating_process_is_killed(model, tmp_path):
    """--n-process 2, the parent killed with SIGKILL mid-run: its forked workers do not live on."""
    (tmp_path / "in.txt").write_text("我在北京工作\n" * 200_000, encoding="utf8")
    command = [
        sys.executable,
        "-m",
        "spacy_cner",
        "annotate",
        str(model),
        str(tmp_path / "in.txt"),
        str(tmp_path / "out"),
        "--n-process",
        "2",
        "-q",
    ]
    parent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list:
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent.pid:
                found.append(int(stat.parent.name))
        return found

    try:
        deadline = time.time() + 120
        while len(children()) < 2 and time.time() < deadline and parent.poll() is None:
            time.sleep(0.2)
        workers = children()
        assert len(workers) >= 2, "the workers did not start"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 20
        alive = workers
        while alive and time.time() < deadline:
            time.sleep(0.2)
            alive = [
                pid
                for pid in workers
                if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1]
            ]
        assert alive == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_progress_bar_has_a_total_and_reaches_it_on_resume(model, tmp_path, monkeypatch):
    """The rows are counted first (an ETA, as tqdm users expect): as read_rows splits them, and a
    resumed run's bar moves on over the rows already written."""
    import tqdm

    from spacy_cner.annotate import count_rows

    (tmp_path / "in").mkdir()
    files = {"a.txt": b"1\r\n2\n\n3", "b.txt": b"", "c.jsonl": b'{"text": "x"}\n{"text": "y"}\n', "d.txt": b"\n"}
    for name, data in files.items():
        (tmp_path / "in" / name).write_bytes(data)
    sources = find_sources(str(tmp_path / "in"))
    assert count_rows(sources) == sum(1 for source in sources for _ in read_rows(source, "entities")) == 7
    bars = []

    class Recorder(tqdm.tqdm):
        def close(self):
            if not getattr(self, "recorded", False):  # tqdm closes again when collected
                self.recorded = True
                bars.append((self.total, self.n))
            super().close()

    monkeypatch.setattr(tqdm, "tqdm", Recorder)
    annotate(AnnotateJob(str(model)), str(tmp_path / "in"), tmp_path / "out", shard_size=1, progress=True)
    (tmp_path / "out" / "a.00001.jsonl").unlink()  # a killed run
    (tmp_path / "out" / ".annotate" / "done" / "a.json").unlink()
    annotate(AnnotateJob(str(model)), str(tmp_path / "in"), tmp_path / "out", shard_size=1, progress=True)
    assert bars == [(7, 7), (7, 7)]


def test_csv_and_tsv_input_with_a_text_column(model, tmp_path):
    """CSV (quoted fields with commas and line breaks) and TSV with a header: --text-column names
    the text's column, the other columns are carried; bad rows (bytes that are not UTF-8, more values
    than the header, no such column) are per-row errors naming file and row; a text file refuses a
    text column."""
    csv_file = tmp_path / "in.csv"
    csv_file.write_bytes('id,body\n1,我在北京\n2,"北京，上海\n很大"\n'.encode("utf8") + b"3,\xff\xfe\n4,a,b\n")
    summary = annotate(AnnotateJob(str(model), text_field="body"), str(csv_file), tmp_path / "out")
    rows = read_jsonl(tmp_path / "out")
    assert [row.get("id") for row in rows] == ["1", "2", "3", "4"] and rows[1]["body"] == "北京，上海\n很大"
    assert entity_tuples(rows[0]) == expected_entities(model, ["我在北京"])[0]
    assert rows[2]["error"] == f"{csv_file}, row 3: not UTF-8 (the bytes are kept as \\x escapes)"
    assert rows[2]["body"] == "\\xff\\xfe"
    assert rows[3]["error"].startswith(f"{csv_file}, row 4: 1 more values than the header's 2 columns")
    assert (summary.docs, summary.errors) == (2, 2)
    tsv_file = tmp_path / "in.tsv"
    tsv_file.write_text("text\tsource\n我在北京\tweb\n", encoding="utf8")
    annotate(AnnotateJob(str(model)), str(tsv_file), tmp_path / "out_tsv")
    (row,) = read_jsonl(tmp_path / "out_tsv")
    assert row["source"] == "web" and entity_tuples(row) == expected_entities(model, ["我在北京"])[0]
    annotate(AnnotateJob(str(model), text_field="body"), str(tsv_file), tmp_path / "out_missing")
    assert read_jsonl(tmp_path / "out_missing")[0]["error"].endswith("row 1: no 'body' field")
    (tmp_path / "in.txt").write_text("我在北京\n", encoding="utf8")
    with pytest.raises(ValueError, match="names a column, but .*in.txt is a text file"):
        annotate(AnnotateJob(str(model), text_field="body"), str(tmp_path / "in.txt"), tmp_path / "out_txt")
