"""cli/arguments.py reads config overrides and comma-separated lists as spaCy's commands do (its private
spacy.cli._util, the reference here where this spaCy still has it)."""

import click
import pytest
from typer.testing import CliRunner

from spacy_cner.cli import app
from spacy_cner.cli.arguments import parse_config_overrides, string_to_list

OVERRIDES = [
    [],
    ["--training.max_steps", "100"],
    ["--training.max_steps=100", "--paths.train", "corpus/train.spacy"],
    ["--training.max-steps=5", "--training.dropout", "0.2"],
    ["--nlp.batch_size", "[1, 2]", "--training.logger.progress_bar"],
    ["--components.crf_ner.model.nO", "null", "--x.y", '"quoted"', "--x.z", "a b"],
]
LISTS = ["", "sdist", "sdist,wheel", " sdist , wheel ", "[a.py, 'b.py', \"c.py\"]", "'\"a\"'"]


@pytest.mark.parametrize("args", OVERRIDES)
def test_overrides_as_spacy_reads_them(args, monkeypatch):
    spacy_util = pytest.importorskip("spacy.cli._util", reason="the reference: spaCy's private CLI helpers")
    monkeypatch.setenv("SPACY_CONFIG_OVERRIDES", "--training.seed 3 --paths.dev 'my dev.spacy'")
    assert parse_config_overrides(list(args)) == spacy_util.parse_config_overrides(list(args))
    assert parse_config_overrides(list(args))["training.seed"] == 3


def test_overrides_without_spacys_helpers(monkeypatch):
    monkeypatch.delenv("SPACY_CONFIG_OVERRIDES", raising=False)
    assert parse_config_overrides(["--training.max_steps=100", "--a.b", "--c.d", "text"]) == {
        "training.max_steps": 100,
        "a.b": True,
        "c.d": "text",
    }
    with pytest.raises(click.NoSuchOption):
        parse_config_overrides(["--max_steps", "100"])
    with pytest.raises(SystemExit):
        parse_config_overrides(["training.max_steps"])
    monkeypatch.setenv("SPACY_CONFIG_OVERRIDES", "--training.seed 'unclosed")
    assert parse_config_overrides([]) == {"training.seed": "unclosed"}


@pytest.mark.parametrize("value", LISTS)
def test_lists_as_spacy_reads_them(value):
    spacy_util = pytest.importorskip("spacy.cli._util", reason="the reference: spaCy's private CLI helpers")
    assert string_to_list(value) == spacy_util.string_to_list(value)


def test_distill_refuses_an_override_without_a_section(tmp_path):
    """`distill`'s extra arguments are config overrides: one without a section is no option, said in one line
    that names it and the override's form (not click's traceback), before anything loads."""
    for name in ("student.cfg", "train.spacy", "dev.spacy"):
        (tmp_path / name).write_bytes(b"")
    files = ["--train", str(tmp_path / "train.spacy"), "--dev", str(tmp_path / "dev.spacy")]
    args = ["distill", "no_such_teacher", str(tmp_path / "student.cfg"), *files, "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*args, "--max_steps", "5"])
    assert result.exit_code == 1 and not isinstance(result.exception, click.NoSuchOption)
    assert "No such option '--max_steps'" in result.output and "--training.max_steps 5" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
