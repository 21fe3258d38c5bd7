"""The `python -m spacy_cner` app, its printer and the choices its options take (from the modules behind them)."""

from enum import Enum
from typing import Any, Sequence, Type

import typer
from wasabi import Printer

from ..annotate.inputs import INPUT_FORMATS
from ..annotate.job import ENGINES, OUTPUT_FORMATS
from ..annotate.select import OUTPUT_FORMATS as SELECT_FORMATS
from ..annotate.select import STRATEGIES
from ..corpus.convert import FORMATS
from ..corpus.export import EXPORT_FORMATS
from ..robustness.metrics import PAIRINGS
from ..tags import EXPORT_SCHEMES, INPUT_SCHEMES


app = typer.Typer(
    name="spacy_cner",
    help="Chinese NER for spaCy: data conversion and project commands.",
    no_args_is_help=True,
    add_completion=False,
)
msg = Printer()


def _choices(name: str, values: Sequence[str], doc: str) -> Type[Enum]:
    """A str Enum of the values a module accepts, as typer takes a choice option; the values
    come from the module, so the CLI offers what the function behind it takes."""
    choices = Enum(name, [(value, value) for value in values], type=str)
    choices.__doc__ = doc
    return choices


InputFormat = _choices("InputFormat", FORMATS, "Input formats of `convert`.")
TagScheme = _choices("TagScheme", INPUT_SCHEMES, "Tag schemes of the one-character-per-line formats.")
ExportFormat = _choices("ExportFormat", EXPORT_FORMATS, "Output formats of `export`.")
ExportScheme = _choices("ExportScheme", EXPORT_SCHEMES, "Tag schemes `export --format chars` writes.")
Pairing = _choices("Pairing", PAIRINGS, "How `robustness` joins test sentences.")
AnnotateEngine = _choices("AnnotateEngine", ENGINES, "Where `annotate` runs.")
AnnotateInput = _choices(
    "AnnotateInput", ["auto", *dict.fromkeys(INPUT_FORMATS.values())], "Input formats of `annotate` and `select`."
)
AnnotateOutput = _choices("AnnotateOutput", list(OUTPUT_FORMATS), "Output formats of `annotate`.")
SelectStrategy = _choices("SelectStrategy", STRATEGIES, "How `select` ranks texts.")
SelectFormat = _choices("SelectFormat", SELECT_FORMATS, "Output formats of `select`.")


def file_option(default: Any, *flags: str, help: str) -> Any:
    """A typer option naming a file that must exist and be readable, not a folder (typer says which before the
    command runs): the form every command's input-file options take.

    default (Any): The option's default: ... for a required one, None for an optional one.
    flags (str): Its names ("--train", "-t").
    help (str): What the file is, for --help.
    RETURNS (Any): typer's OptionInfo, as the parameter's default.
    """
    return typer.Option(default, *flags, exists=True, dir_okay=False, readable=True, help=help)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"spacy-cner {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print spacy-cner's version and exit."
    ),
) -> None:
    """Chinese NER for spaCy: data conversion and project commands."""


def run(prog_name: str = "spacy-cner") -> None:
    """The `spacy-cner` console script (setup.cfg) and `python -m spacy_cner`."""
    app(prog_name=prog_name)
