"""The `python -m spacy_cner` app, its printer and the choices its options take (from the modules behind them)."""

from enum import Enum
from typing import Sequence, Type

import typer
from wasabi import Printer

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
AnnotateOutput = _choices("AnnotateOutput", list(OUTPUT_FORMATS), "Output formats of `annotate`.")
SelectStrategy = _choices("SelectStrategy", STRATEGIES, "How `select` ranks texts.")
SelectFormat = _choices("SelectFormat", SELECT_FORMATS, "Output formats of `select`.")


@app.callback()
def main() -> None:
    """Chinese NER for spaCy: data conversion and project commands."""
