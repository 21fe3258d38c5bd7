"""Command-line interface: `python -m spacy_cner COMMAND ...`, one module per group of commands.

_app: the typer app and the choices its options take; corpus: convert, export, fetch-assets; evaluation:
show-ents, robustness; annotation: annotate, select, train-vectors; spacy_tools: spaCy's evaluate and
debug data with crf_ner pipes as `ner`, its package with a quiet build; pretrained: LAC's weights
(fetch, vectors); distillation: distill; serve: the server; calibration: calibrate; checks: the checks
every command makes before its work (the pipeline loads, the output can be written). Importing them
registers their commands, in this order. `run` is the `spacy-cner` console script (setup.cfg) and
`python -m spacy_cner`.
"""

# Importing the command modules registers their commands, listed by --help in this order.
from . import corpus  # noqa: F401  isort:skip
from . import evaluation  # noqa: F401  isort:skip
from . import annotation  # noqa: F401  isort:skip
from . import spacy_tools  # noqa: F401  isort:skip
from . import pretrained  # noqa: F401  isort:skip
from . import distillation  # noqa: F401  isort:skip
from . import serve  # noqa: F401  isort:skip
from . import calibration  # noqa: F401  isort:skip
from ._app import app, msg, run
from .corpus import FORMAT_SUFFIXES, output_name, print_stats
from .evaluation import display_table, display_width
from .spacy_tools import crf_ner_as_ner

__all__ = [
    "app",
    "msg",
    "run",
    "FORMAT_SUFFIXES",
    "output_name",
    "print_stats",
    "display_table",
    "display_width",
    "crf_ner_as_ner",
]
