"""Sentence-level robustness: S/P/R-F1 and the attack success rate of joined sentences (`metrics`) and
the HTML report (`report`). The two fixes are layers: context-sensitive entity attention
(`layers/entity_attention.py`) and a limited attention window (`layers/attention_window.py`)."""

from .metrics import make_robust_ner_scorer

__all__ = ["make_robust_ner_scorer"]
