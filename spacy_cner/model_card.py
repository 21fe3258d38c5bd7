"""Moved to spacy_cner.cli.model_card (a helper of `python -m spacy_cner model-card`); this module keeps the
old import path for one release (CHANGELOG.md)."""

from .cli.model_card import COPY_MARKER, write_model_card  # noqa: F401
