"""Moved to spacy_cner.annotate.uncertainty (the active-learning strategies that select ranks by; the pipe
imports them from there); this module keeps the old import path for one release (CHANGELOG.md)."""

from ..annotate.uncertainty import SPAN_STRATEGIES, STRATEGIES, scoring_pipe, strategy_score  # noqa: F401
