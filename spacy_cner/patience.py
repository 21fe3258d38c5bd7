"""spacy-cner.patience.v1, kept importable here: it lives in spacy_cner.training.corpus_size with the other
training settings computed from the corpus."""

from .training.corpus_size import corpus_patience

__all__ = ["corpus_patience"]
