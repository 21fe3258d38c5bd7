"""`python -m spacy_cner init-config`: the shipped training configs, where `spacy init config -p crf_ner`
gives the factory's plain BiLSTM-CRF; they travel inside the wheel."""

import subprocess
import sys
import zipfile
from pathlib import Path

import spacy
from spacy.util import load_config
from typer.testing import CliRunner

import spacy_cner
from spacy_cner.cli import app
from spacy_cner.training.shipped_configs import config_names, config_path

from conftest import REPO_ROOT


def test_every_config_of_the_repository_is_shipped():
    assert config_names() == sorted(path.stem for path in (REPO_ROOT / "configs").glob("*.cfg"))
    assert spacy_cner.config_path() == config_path("default")
    assert config_path("fast").read_bytes() == (REPO_ROOT / "configs" / "fast.cfg").read_bytes()


def test_init_config_writes_the_default_and_refuses_to_overwrite(tmp_path):
    runner = CliRunner()
    output = tmp_path / "sub" / "config.cfg"
    result = runner.invoke(app, ["init-config", str(output)])
    assert result.exit_code == 0, result.output
    assert output.read_bytes() == (REPO_ROOT / "configs" / "default.cfg").read_bytes()
    tok2vec = load_config(output, interpolate=False)["components"]["crf_ner"]["model"]["tok2vec"]
    assert tok2vec["static_vectors"] is True and "soft_lexicon" in tok2vec
    output.write_text("mine", encoding="utf8")
    result = runner.invoke(app, ["init-config", str(output), "--config", "tener"])
    assert result.exit_code == 1 and "--force" in result.output
    assert output.read_text(encoding="utf8") == "mine"
    result = runner.invoke(app, ["init-config", str(output), "--config", "tener", "--force"])
    assert result.exit_code == 0 and output.read_bytes() == (REPO_ROOT / "configs" / "tener.cfg").read_bytes()


def test_init_config_bad_output_paths_are_one_line_each(tmp_path):
    """A folder, a path below a file, a place that cannot be written: exit 1, one message, no traceback."""
    (tmp_path / "a_file").write_text("mine", encoding="utf8")
    for output, said, force in (
        (tmp_path, "is a folder", []),
        (tmp_path, "is a folder", ["--force"]),
        (tmp_path / "a_file" / "config.cfg", "Cannot write", []),
        (Path("/sys/spacy_cner_test/config.cfg"), "Cannot write", []),
    ):
        result = CliRunner().invoke(app, ["init-config", str(output), *force])
        text = " ".join(result.output.split())
        assert result.exit_code == 1 and said in text and text.count("✘") == 1, result.output
        assert isinstance(result.exception, SystemExit)
    assert (tmp_path / "a_file").read_text(encoding="utf8") == "mine"


def test_init_config_prints_and_rejects_unknown_names():
    runner = CliRunner()
    result = runner.invoke(app, ["init-config", "-", "-c", "fast"])
    assert result.exit_code == 0 and result.output == (REPO_ROOT / "configs" / "fast.cfg").read_text(encoding="utf8")
    result = runner.invoke(app, ["init-config", "-", "-c", "nope"])
    assert result.exit_code == 2 and "nope" in result.output


def test_spacys_init_config_gives_the_factorys_plain_model(tmp_path):
    """Why init-config exists: spaCy fills crf_ner with its factory's defaults (no SoftLexicon)."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner")
    tok2vec = nlp.config["components"]["crf_ner"]["model"]["tok2vec"]
    assert tok2vec.get("soft_lexicon") is None and not tok2vec.get("static_vectors")


def test_the_wheel_carries_the_configs(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO_ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("spacy_cner-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {f"spacy_cner/configs/{name}.cfg" for name in config_names()} <= names
        assert archive.read("spacy_cner/configs/default.cfg") == config_path("default").read_bytes()
