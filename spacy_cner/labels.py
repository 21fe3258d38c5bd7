"""Moved to spacy_cner.corpus.labels (what the corpora's labels mean is corpus knowledge); this module keeps
the old import path for one release (CHANGELOG.md)."""

from .corpus.labels import DATASET_LABELS, dataset_of, explain_labels, label_descriptions  # noqa: F401
