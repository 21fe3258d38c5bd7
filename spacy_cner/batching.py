"""Moved to spacy_cner.backends.batching (runtime machinery the layers call); this module keeps the old import
path for one release (CHANGELOG.md)."""

from .backends.batching import batches_by_budget  # noqa: F401
