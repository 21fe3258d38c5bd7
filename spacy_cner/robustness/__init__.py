"""Sentence-level robustness: S/P/R-F1 and the attack success rate of joined sentences (`metrics`),
the HTML report (`report`), and the two fixes, context-sensitive entity attention (`entity_attention`)
and a limited attention window (`attention_window`)."""

from .metrics import make_robust_ner_scorer

__all__ = ["make_robust_ner_scorer"]
