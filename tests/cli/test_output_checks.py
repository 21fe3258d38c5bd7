"""Issue 85: an output path that cannot be written fails in one line before the work (it was an OSError's
traceback after it), and `export` of a file that is no .spacy says so naming the file."""

from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_cner.cli import app
from spacy_cner.cli.checks import output_problem

runner = CliRunner()
# sysfs: nothing can be made there, root or not.
UNWRITABLE = Path("/sys/spacy_cner_test")


@pytest.fixture
def inputs(tmp_path):
    nlp = spacy.blank("zh")
    nlp.to_disk(tmp_path / "model")
    texts = (("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("李四在北京", [(0, 2, "PER"), (3, 5, "LOC")]))
    docs = [Example.from_dict(nlp.make_doc(text), {"entities": ents}).reference for text, ents in texts]
    DocBin(docs=docs).to_disk(tmp_path / "test.spacy")
    (tmp_path / "train.txt").write_text("张 B-PER\n三 I-PER\n去 O\n", encoding="utf8")
    (tmp_path / "a_file").write_text("mine", encoding="utf8")
    return tmp_path


def command(name: str, path: Path, output: str):
    return {
        "convert": ["convert", str(path / "train.txt"), output],
        "export": ["export", str(path / "test.spacy"), output],
        "train-vectors": ["train-vectors", str(path / "test.spacy"), output],
        "robustness": ["robustness", str(path / "model"), str(path / "test.spacy"), output],
        "evaluate --output": ["evaluate", str(path / "model"), str(path / "test.spacy"), "--output", output],
        "evaluate --displacy-path": ["evaluate", str(path / "model"), str(path / "test.spacy"), "-dp", output],
    }[name]


FOLDER_OUTPUTS = ("train-vectors", "robustness", "evaluate --displacy-path")
COMMANDS = ("convert", "export", *FOLDER_OUTPUTS, "evaluate --output")


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("where", ["below a file", "unwritable", "wrong kind"])
def test_an_output_that_cannot_be_written_fails_in_one_line_before_the_work(inputs, monkeypatch, name, where):
    import spacy_cner.training.vectors as vectors

    monkeypatch.setattr(vectors, "train_vectors", lambda *args, **kwargs: pytest.fail("the work ran"))
    monkeypatch.setattr(spacy, "load", lambda *args, **kwargs: pytest.fail("the work ran"))
    folder = name in FOLDER_OUTPUTS
    written = None
    if where == "wrong kind":  # a file where a folder is written, a folder where a file is
        output = inputs / "a_file" if folder else inputs
        if name == "convert":  # a folder: convert writes FOLDER/train.spacy, here a folder
            (inputs / "train.spacy").mkdir()
            written = inputs / "train.spacy"
    else:
        output = inputs / "a_file" / "out" if where == "below a file" else UNWRITABLE / "out"
    before = sorted(inputs.rglob("*"))
    result = runner.invoke(app, command(name, inputs, str(output)))
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    what = name.split()[-1] if "--" in name else "the output"
    assert said.count("✘") == 1 and f"Cannot write {what} {written or output}:" in said, said
    expected = {
        "below a file": f"{inputs / 'a_file'} is a file, not a folder",
        "unwritable": "nothing can be written in /sys",
        "wrong kind": "it is a file, not a folder" if folder else "it is a folder: name a file",
    }[where]
    assert expected in said, said
    assert sorted(inputs.rglob("*")) == before  # nothing made, nothing changed
    assert (inputs / "a_file").read_text(encoding="utf8") == "mine"


def test_output_problem(tmp_path):
    assert output_problem(tmp_path / "new" / "deeper" / "file.txt", folder=False) is None
    assert output_problem(tmp_path / "new" / "folder", folder=True) is None
    assert output_problem(tmp_path, folder=True) is None
    (tmp_path / "file").write_text("", encoding="utf8")
    assert output_problem(tmp_path / "file", folder=False) is None  # overwritten, as the commands warn
    assert output_problem(tmp_path / "file" / "x" / "y", folder=True) == f"{tmp_path / 'file'} is a file, not a folder"
    assert not (tmp_path / "new").exists() and sorted(tmp_path.iterdir()) == [tmp_path / "file"]


@pytest.mark.parametrize("damage", ["text", "cut", "empty"])
def test_export_of_a_file_that_is_no_docbin_names_it(inputs, damage):
    bad = inputs / "bad.spacy"
    data = (inputs / "test.spacy").read_bytes()
    bad.write_bytes({"text": "张 B-PER\n".encode("utf8"), "cut": data[: len(data) // 2], "empty": b""}[damage])
    result = runner.invoke(app, ["export", str(bad), str(inputs / "out.txt")])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert said.count("✘") == 1 and f"Cannot read {bad}: it is not a .spacy (DocBin) file" in said
    assert "v2" not in said and not (inputs / "out.txt").exists()
