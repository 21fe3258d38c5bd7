"""The extension attributes the package sets: ent._.score (crf_ner's entity probabilities, and the ready LAC
pipeline's) and doc._.uncertainty (crf_ner's, for active learning), registered on import (once: spaCy refuses a
second registration without force). A module of its own, on the ground floor, so that every pipe that sets them
imports it without importing another's."""

from typing import Any, Dict, Optional

from spacy.tokens import Doc, Span

# ent._.score: an entity's probability under the CRF, set by crf_ner for every doc.ents entity (1 for
# those of labels it does not predict, set before it); saved with the doc (to_bytes, DocBin with
# store_user_data, to_json(underscore=["score"])). None where no probability was computed
# (spans_key and ents_threshold both null), and for a span a later pipe relabelled (an entity_ruler
# with overwrite_ents): spaCy keys a span's extension values by its characters only, so the label
# the score is for is stored beside it and must still be the span's.


def _span_score(span: Span) -> Optional[float]:
    """ent._.score's getter: the stored probability, None when it was given for another label."""
    data: Dict[Any, Any] = span.doc.user_data  # spaCy's extension values, keyed by tuples
    label = data.get(("._.", "score_label", span.start_char, span.end_char))
    if label is not None and label != span.label_:
        return None
    return data.get(("._.", "score", span.start_char, span.end_char))


def _set_span_score(span: Span, value: Optional[float]) -> None:
    """ent._.score's setter: the probability where spaCy keeps span values (saved with the doc as they
    are), the label it is for beside it."""
    data: Dict[Any, Any] = span.doc.user_data
    data[("._.", "score", span.start_char, span.end_char)] = value
    data[("._.", "score_label", span.start_char, span.end_char)] = span.label_


if not Span.has_extension("score"):
    Span.set_extension("score", getter=_span_score, setter=_set_span_score)
# doc._.uncertainty: how unsure crf_ner is of the doc under its `uncertainty` strategy (active
# learning: spacy_cner.annotate.select), set only while that is not None; saved with the doc as
# ent._.score is.
if not Doc.has_extension("uncertainty"):
    Doc.set_extension("uncertainty", default=None)
