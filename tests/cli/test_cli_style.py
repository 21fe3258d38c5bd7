"""One style across `python -m spacy_cner`'s commands: a mistyped model fails in one line, help texts describe
this command, --version and the `spacy-cner` console script, choices validated by typer, OUTPUT an argument."""

import configparser
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from conftest import REPO_ROOT, trained_pipeline
from spacy_cner import __version__
from spacy_cner.cli import app

runner = CliRunner()


def said(result) -> str:
    """The output, unwrapped (the printer wraps long lines)."""
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("style") / "model"
    trained_pipeline(path)
    return path


@pytest.fixture
def corpus(tmp_path):
    nlp = spacy.blank("zh")
    DocBin(docs=[nlp.make_doc("张三"), nlp.make_doc("李四")]).to_disk(tmp_path / "test.spacy")
    return tmp_path / "test.spacy"


@pytest.mark.parametrize("command", ["show-ents", "robustness", "evaluate"])
def test_a_mistyped_model_fails_in_one_line(tmp_path, corpus, command):
    """As annotate and select say it: the model's name and spaCy's reason, no traceback."""
    args = {
        "show-ents": ["no_such_model", "张三"],
        "robustness": ["no_such_model", str(corpus), str(tmp_path / "out")],
        "evaluate": ["no_such_model", str(corpus)],
    }[command]
    result = runner.invoke(app, [command, *args])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a message, not an exception's traceback
    assert "E050" in said(result) and "'no_such_model'" in said(result)
    assert not (tmp_path / "out").exists()


def test_evaluate_and_debug_data_help_describe_these_commands():
    result = runner.invoke(app, ["evaluate", "--help"])
    assert result.exit_code == 0
    assert "Usage: python -m spacy_cner evaluate" in result.output
    assert "dependency parses" not in said(result) and "rendered parses" not in said(result)
    assert "crf_ner" in said(result) and "entities.html" in said(result) and "--displacy-path" in result.output
    result = runner.invoke(app, ["debug-data", "--help"])
    assert result.exit_code == 0
    assert "Usage: python -m spacy_cner debug-data [OPTIONS]" in result.output, result.output
    assert "spacy_cner debug data" not in result.output and "named-entity checks" in said(result)


def test_version_and_console_script():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"spacy-cner {__version__}"
    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg", encoding="utf8")
    scripts = dict(line.split(" = ") for line in setup["options.entry_points"]["console_scripts"].split("\n") if line)
    module, function = scripts["spacy-cner"].split(":")
    code = f"import sys; from {module} import {function}; sys.argv = ['spacy-cner', '--version']; {function}()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"spacy-cner {__version__}", result.stderr
    code = f"import sys; from {module} import {function}; sys.argv = ['spacy-cner', '--help']; {function}()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "Usage: spacy-cner [OPTIONS] COMMAND" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("command", ["annotate", "select"])
def test_input_format_is_a_choice(tmp_path, command):
    args = [command, "model", "in.txt", str(tmp_path / "out"), "--input-format", "xml"]
    result = runner.invoke(app, args + (["-n", "1"] if command == "select" else []))
    assert result.exit_code == 2
    assert "'xml' is not one of" in said(result) and "'jsonl'" in said(result)


def test_robustness_and_select_take_the_output_as_an_argument(tmp_path, model):
    """As convert, export, annotate and train-vectors: `-o/--output` still works, with a warning."""
    (tmp_path / "in.txt").write_text("我在北京\n北京\n", encoding="utf8")
    result = runner.invoke(app, ["select", str(model), str(tmp_path / "in.txt"), str(tmp_path / "a.jsonl"), "-n", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.jsonl").is_file() and "deprecated" not in result.output
    result = runner.invoke(app, ["select", str(model), str(tmp_path / "in.txt"), "-n", "1", "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b").is_file() and "-o/--output is deprecated" in said(result)
    assert "select MODEL INPUT OUT -n N" in said(result)
    nlp = spacy.load(model)
    docs = [
        Example.from_dict(nlp.make_doc(text), {"entities": [(len(text) - 2, len(text), "LOC")]}).reference
        for text in ("我在北京", "北京")
    ]
    DocBin(docs=docs).to_disk(tmp_path / "test.spacy")
    args = ["robustness", str(model), str(tmp_path / "test.spacy")]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "metrics.json").is_file() and "-o/--output is deprecated" in said(result)
    result = runner.invoke(app, [*args, str(tmp_path / "r2"), "-o", str(tmp_path / "r3")])
    assert result.exit_code == 1 and "given twice" in said(result)
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "Missing the output: robustness MODEL DATA OUTPUT" in said(result)


# The options of the commands that build an AnnotateJob (cli.engine_options), as they were before it: the
# job is built from them, the CLI keeps them.
ENGINE_COMMAND_OPTIONS = {
    "annotate": "--address --batch-size --engine --entities-field --format --gpu-id --gpus-per-worker --input-format "
    "--n-process --quiet --shard-size --text-column --workers -f -q",
    "select": "--address --batch-size --density --diversity --engine --explore --format --gpu-id --gpus-per-worker "
    "--input-format --n --n-process --output --power --quiet --seed --shard-size --strategy --text-column --workers "
    "-f -n -o -q -s",
    "distill": "--address --augment --batch-size --dev --engine --gold-weight --gpu-id --gpus-per-worker --max-steps "
    "--n-process --output --quiet --shard-size --temperature --test --text --train --workers -o -q -t",
}


@pytest.mark.parametrize("command", sorted(ENGINE_COMMAND_OPTIONS))
def test_the_engine_commands_keep_their_options(command):
    import typer

    params = typer.main.get_command(app).commands[command].params
    options = sorted(name for param in params if param.param_type_name == "option" for name in param.opts)
    assert options == ENGINE_COMMAND_OPTIONS[command].split()
    result = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0 and all(option in result.output for option in options)


def test_one_helper_builds_the_job_from_the_shared_options():
    """annotate_job takes AnnotateJob's fields from a command's parameters (--text-column as text_field, a
    choice's value), the others at their defaults, and nothing else."""
    from spacy_cner.annotate.job import AnnotateJob
    from spacy_cner.cli._app import AnnotateEngine
    from spacy_cner.cli.engine_options import annotate_job

    options = {"model": "other", "engine": AnnotateEngine("ray"), "workers": 3, "text_column": "body", "seed": 4}
    assert annotate_job("m", options) == AnnotateJob("m", engine="ray", workers=3, text_field="body")
    assert annotate_job("m", {"batch_size": 8, "temperature": 2.0}) == AnnotateJob("m", batch_size=8)


def test_engine_options_are_declared_once_and_refuse_a_clash():
    """The shared options reach typer through the command's signature (each command's own parameters
    first), their help after the command's stage, and a command that declares one itself is refused."""
    import inspect

    import typer

    from spacy_cner.cli.engine_options import OPTIONS, engine_options, option_help

    @engine_options(["workers", "batch_size"], stage="Teacher pass", help={"batch_size": "Own help."})
    def command(ctx: typer.Context, model: str = typer.Argument(...)) -> None:
        """A command."""

    assert list(inspect.signature(command).parameters) == ["ctx", "model", "workers", "batch_size"]
    assert (
        inspect.signature(command).parameters["workers"].default.help
        == "Teacher pass, Ray: actors, each loading the pipeline once."
    )
    assert inspect.signature(command).parameters["batch_size"].default.help == "Own help."
    assert option_help(OPTIONS["n_process"]) == "Local engine: nlp.pipe processes."
    assert command(ctx=None, model="m", workers=2, batch_size=8) is None  # the shared ones are not passed on
    with pytest.raises(ValueError, match="declares \\['workers'\\] itself"):
        engine_options(["workers"])(lambda ctx, workers=1: None)
    with pytest.raises(ValueError, match="no shared option \\['seed'\\]"):
        engine_options(["seed"])
    params = typer.main.get_command(app).commands["distill"].params
    assert {param.name: param.help for param in params}[
        "n_process"
    ] == "Teacher pass, local engine: nlp.pipe processes."
