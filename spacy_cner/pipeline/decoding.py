"""Decoding for the `crf_ner` pipe: emission scores in token-budget chunks and windows, the CRF's best
paths under pre-set entities, and the entity probabilities of the spans.

Functions of the model and the tag set, not of the pipe, so that the pipe file keeps spaCy's contract
(predict, set_annotations, update...) and each step here can be read, and tested, on its own.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy
from spacy.tokens import Doc, Span, SpanGroup
from thinc.api import Model, Ops
from thinc.types import Floats2d, Ints1d

from ..batching import batches_by_budget
from ..layers.crf import crf_decode
from ..layers.crf_posteriors import entity_probabilities, token_marginals
from ..long_docs import WINDOW_ATTRS, Window, doc_windows, window_doc, window_segments
from ..tags import TagSet, most_probable_spans, preset_constraints, tags_to_spans
from .alignment import align_scores, align_spans

# At prediction, the most tokens (summed over docs and windows) per model call: bounds the
# memory of the layers' activations on long docs and big batches.
EMISSION_BATCH_TOKENS = 16384
# The most tokens of a long doc's windows per model call: their activations come on top of the
# doc and its emission rows, and set a long doc's peak memory (bench/bench_long_docs.py).
WINDOW_BATCH_TOKENS = 4096
# (start token, end token, label) -> probability
SpanScores = Dict[Tuple[int, int, str], float]

# ent._.score: an entity's probability under the CRF, set by crf_ner for every doc.ents entity (1 for
# those of labels it does not predict, set before it); saved with the doc (to_bytes, DocBin with
# store_user_data, to_json(underscore=["score"])). None where no probability was computed
# (spans_key and ents_threshold both null), and for a span a later pipe relabelled (an entity_ruler
# with overwrite_ents): spaCy keys a span's extension values by its characters only, so the label
# the score is for is stored beside it and must still be the span's.


def _span_score(span: Span) -> Optional[float]:
    """ent._.score's getter: the stored probability, None when it was given for another label."""
    key = ("._.", "score", span.start_char, span.end_char)
    label = span.doc.user_data.get(("._.", "score_label", span.start_char, span.end_char))
    if label is not None and label != span.label_:
        return None
    return span.doc.user_data.get(key)


def _set_span_score(span: Span, value: Optional[float]) -> None:
    """ent._.score's setter: the probability where spaCy keeps span values (saved with the doc as they
    are), the label it is for beside it."""
    span.doc.user_data[("._.", "score", span.start_char, span.end_char)] = value
    span.doc.user_data[("._.", "score_label", span.start_char, span.end_char)] = span.label_


if not Span.has_extension("score"):
    Span.set_extension("score", getter=_span_score, setter=_set_span_score)
# doc._.uncertainty: how unsure crf_ner is of the doc under its `uncertainty` strategy (active
# learning: spacy_cner.active_learning), set only while that is not None; saved with the doc as
# ent._.score is.
if not Doc.has_extension("uncertainty"):
    Doc.set_extension("uncertainty", default=None)


@dataclass
class Tagging:
    """What CRFEntityRecognizer.predict found in a batch of docs."""

    # Per doc, the best tag ids (indices into the pipe's tag_names); None when doc.ents are
    # decoded at a threshold, which needs no best path.
    tag_ids: Optional[List[Ints1d]]
    # Per doc, (start token, end token, label) -> its probability: the best path's entities (when
    # decoded) and the spans above candidate_threshold (or entity_threshold, if lower); None when
    # the pipe computes no probabilities.
    scores: Optional[List[SpanScores]]
    # Per doc, the character copy it was tagged on (tag ids and scores index its tokens), or
    # None where the doc was tagged as it is.
    char_docs: Optional[List[Optional[Doc]]] = None
    # The probability doc.ents are decoded at (the most probable spans); None: the best path.
    ents_threshold: Optional[float] = None
    # Per doc, its score under the pipe's uncertainty strategy (doc._.uncertainty); None when unset.
    uncertainty: Optional[List[float]] = None


@dataclass
class Decoded:
    """The segments (doc index, start token, end token) of a batch and their emissions,
    tag constraints (None: all allowed) and Viterbi paths (None: not decoded)."""

    segments: List[Tuple[int, int, int]]
    emissions: List[Floats2d]
    allowed: Optional[List[Floats2d]]
    paths: Optional[List[Ints1d]]


def decode(model: Model, docs: List[Doc], tag_set: TagSet, long_doc_window: int, best_path: bool = True) -> Decoded:
    """Emissions, constraints and (if best_path) Viterbi paths of the docs' segments: whole
    docs, or a long doc's windows, each ending at a sentence end (those over one long sentence
    together).

    model (Model): The pipe's model, with a "crf" ref.
    docs (List[Doc]): The docs, with their pre-set entities (the paths keep them).
    tag_set (TagSet): The CRF's tags.
    long_doc_window (int): A doc of more tokens is tagged in windows of at most this many; 0: whole.
    best_path (bool): Compute the Viterbi paths.
    RETURNS (Decoded): The segments and what was computed for them.
    """
    ops = model.ops
    windows = [
        doc_windows(doc, long_doc_window) if long_doc_window and len(doc) > long_doc_window
        else [Window(0, len(doc), 0, len(doc))]
        for doc in docs
    ]
    n_tags = len(tag_set.names)
    emissions = emission_scores(model, docs, windows, n_tags) if any(len(doc) for doc in docs) else []
    ranges = [window_segments(doc_wins) if len(doc) else [] for doc, doc_wins in zip(docs, windows)]
    segments = [(i, start, end) for i, doc_ranges in enumerate(ranges) for start, end in doc_ranges]
    constraints = [
        None if c is None else ops.asarray2f(c)
        for doc, doc_ranges in zip(docs, ranges)
        for c in preset_constraints(doc, doc_ranges, tag_set)
    ]
    allowed = None
    if any(c is not None for c in constraints):
        allowed = [
            c if c is not None else ops.xp.ones((end - start, n_tags), dtype="f")
            for c, (_, start, end) in zip(constraints, segments)
        ]
    segment_emissions = [emissions[i][start:end] for i, start, end in segments]
    paths = None
    if best_path:
        paths = crf_decode(model.get_ref("crf"), segment_emissions, allowed) if segments else []
    return Decoded(segments, segment_emissions, allowed, paths)


def doc_paths(model: Model, n_docs: int, decoded: Decoded) -> List[Ints1d]:
    """Per doc, the tag ids of its segments' best paths, joined (decoded.paths must be set)."""
    ops = model.ops
    by_doc: List[List[Ints1d]] = [[] for _ in range(n_docs)]
    for (i, _, _), path in zip(decoded.segments, decoded.paths or []):
        by_doc[i].append(path)
    return [ops.xp.concatenate(paths) if paths else ops.alloc1i(0) for paths in by_doc]


def span_scores(
    model: Model, tag_set: TagSet, n_docs: int, decoded: Decoded, threshold: float, temperature: float
) -> List[SpanScores]:
    """Per doc, (start, end, label) -> probability of the best path's entities (when it was
    decoded) and the spans at or above threshold. A long doc's segments were decoded apart:
    so are their probabilities.

    model (Model): The pipe's model, with a "crf" ref.
    tag_set (TagSet): The CRF's tags.
    n_docs (int): The docs decoded.
    decoded (Decoded): What decode computed.
    threshold (float): The least probability of a span that is not on the best path.
    temperature (float): Every CRF score is divided by it.
    RETURNS (List[SpanScores]): The scored spans of each doc.
    """
    tag_names = list(tag_set.names)
    to_list = model.ops.to_numpy
    if decoded.paths is None:
        predicted: List[List[Tuple[int, int, str]]] = [[] for _ in decoded.segments]
    else:
        predicted = [tags_to_spans([tag_names[t] for t in to_list(path).tolist()]) for path in decoded.paths]
    found = entity_probabilities(
        model.get_ref("crf"),
        decoded.emissions,
        predicted,
        tag_set.scheme,
        threshold,
        decoded.allowed,
        temperature=temperature,
    )
    scores: List[SpanScores] = [{} for _ in range(n_docs)]
    for (i, start, _), segment_found in zip(decoded.segments, found):
        scores[i].update({(s + start, e + start, label): p for (s, e, label), p in segment_found.items()})
    return scores


def tag_marginals(model: Model, tag_set: TagSet, docs: List[Doc], decoded: Decoded, temperature: float) -> List[Floats2d]:
    """Per doc, P(token t has tag j | doc) (n_tokens, n_tags), its segments' marginals joined (a long
    doc's segments are decoded apart, as their entity probabilities)."""
    found = token_marginals(model.get_ref("crf"), decoded.emissions, tag_set.scheme, decoded.allowed,
                            temperature=temperature)
    out = [numpy.zeros((len(doc), len(tag_set.names)), dtype="float64") for doc in docs]
    for (i, start, end), marginals in zip(decoded.segments, found):
        out[i][start:end] = marginals
    return out


def tag_docs(
    model: Model,
    tag_set: TagSet,
    docs: List[Doc],
    decoded: Decoded,
    char_docs: List[Optional[Doc]],
    ents_threshold: Optional[float],
    candidate_threshold: Optional[float],
    temperature: float,
    marginals: bool = False,
) -> Tuple[Tagging, Optional[List[Floats2d]]]:
    """What the pipe's predict returns for the decoded docs (each the character copy in char_docs
    where it has one): the best paths where they were decoded, the scored spans where the span group
    (candidate_threshold not None) or the threshold (ents_threshold not None) needs them, and
    (marginals) each doc's tag marginals from the same forward-backward pass.
    """
    n_docs = len(docs)
    found = tag_marginals(model, tag_set, docs, decoded, temperature) if marginals else None
    tag_ids = doc_paths(model, n_docs, decoded) if decoded.paths is not None else None
    if candidate_threshold is None and ents_threshold is None:
        return Tagging(tag_ids, None, char_docs, None), found
    threshold = min(
        candidate_threshold if candidate_threshold is not None else float("inf"),
        ents_threshold if ents_threshold is not None else float("inf"),
    )
    scores = span_scores(model, tag_set, n_docs, decoded, threshold, temperature)
    return Tagging(tag_ids, scores, char_docs, ents_threshold), found


def emission_scores(model: Model, docs: List[Doc], windows: List[List[Window]], n_tags: int) -> List[Floats2d]:
    """The model's emission scores per doc, computed for at most EMISSION_BATCH_TOKENS tokens
    at a time (WINDOW_BATCH_TOKENS for a long doc's windows); each token's row comes from the
    window that owns it. Whole docs and the windows of long docs go to separate model calls
    (each call's docs of similar lengths).
    """
    ops = model.ops
    out: List[Optional[Floats2d]] = [None] * len(docs)
    whole = [(i, w[0]) for i, w in enumerate(windows) if len(w) == 1]
    pieces = [(i, window) for i, w in enumerate(windows) if len(w) > 1 for window in w]
    arrays = {i: docs[i].to_array(WINDOW_ATTRS) for i, w in enumerate(windows) if len(w) > 1}
    for chunk in token_chunks(whole) + token_chunks(pieces, WINDOW_BATCH_TOKENS):
        unit_docs = [docs[i] if i not in arrays else window_doc(docs[i], w, arrays[i]) for i, w in chunk]
        for (i, w), scores in zip(chunk, model.predict(unit_docs)):
            if i not in arrays:
                out[i] = scores
                continue
            if out[i] is None:
                out[i] = ops.alloc2f(len(docs[i]), n_tags)
            out[i][w.own_start : w.own_end] = scores[w.own_start - w.start : w.own_end - w.start]
    return [scores if scores is not None else ops.alloc2f(0, n_tags) for scores in out]


def token_chunks(units: List[Tuple[int, Window]], budget: Optional[int] = None) -> List[List[Tuple[int, Window]]]:
    """Consecutive units (doc index, window) in chunks of at most budget tokens (None:
    EMISSION_BATCH_TOKENS), or one unit."""
    lengths = [window.end - window.start for _, window in units]
    budget = EMISSION_BATCH_TOKENS if budget is None else budget
    return [[units[i] for i in batch] for batch in batches_by_budget(lengths, budget)]


def doc_entities(
    ops: Ops,
    doc: Doc,
    tag_ids: Optional[Ints1d],
    scores: Optional[SpanScores],
    char_doc: Optional[Doc],
    tag_names: List[str],
    labels: Set[str],
    ents_threshold: Optional[float],
    alignment_mode: str,
) -> Tuple[List[Tuple[int, int, str]], Optional[SpanScores], int]:
    """A doc's entities as predict decoded them: the best path's (ents_threshold None), or the most
    probable spans at ents_threshold, keeping the pre-set entities of the pipe's labels; mapped onto
    the doc's tokens when it was tagged on its character copy.

    RETURNS (Tuple): the entities (start, end, label) as token spans of doc, the scored spans as
        token spans of doc, and how many entities did not map onto its tokens.
    """
    if ents_threshold is None:
        found = tags_to_spans([tag_names[i] for i in ops.to_numpy(tag_ids).tolist()])
    else:
        tagged = doc if char_doc is None else char_doc
        kept = [(ent.start, ent.end, ent.label_) for ent in tagged.ents if ent.label_ in labels]
        found = most_probable_spans(scores, ents_threshold, required=kept)
    lost = 0
    if char_doc is not None:
        found, lost = align_spans(char_doc, doc, found, alignment_mode)
        if scores is not None:
            scores = align_scores(char_doc, doc, scores, alignment_mode)
    return found, scores, lost


def span_group(doc: Doc, key: str, scores: SpanScores, entities: List[Tuple[int, int, str]],
               candidate_threshold: float) -> SpanGroup:
    """The doc's entities and the alternatives at or above candidate_threshold, sorted, each with its
    probability in the group's attrs["scores"] (float32, as spancat's). An entity is the doc's own span
    (its kb_id and id kept, so that `span in doc.ents` holds for it)."""
    shown = set(entities)
    own = {(ent.start, ent.end, ent.label_): ent for ent in doc.ents}
    ordered = sorted(s for s, p in scores.items() if p >= candidate_threshold or s in shown)
    group = SpanGroup(doc, name=key, spans=[own.get(span) or Span(doc, *span) for span in ordered])
    group.attrs["scores"] = numpy.asarray([scores[span] for span in ordered], dtype="float32")
    return group


def set_doc_entities(
    doc: Doc,
    found: List[Tuple[int, int, str]],
    scores: Optional[SpanScores],
    labels: Set[str],
    spans_key: Optional[str],
    candidate_threshold: float,
) -> None:
    """Set doc.ents to the found entities and every entity's probability (ent._.score), and the
    span group doc.spans[spans_key] (scores None: neither).

    Pre-set entities come back unchanged (kb_id too); those of labels the pipe does not predict
    were decoded as "O", are added back, get probability 1 and join the span group.
    """
    preset = {(ent.start, ent.end, ent.label_): ent for ent in doc.ents}
    spans = [preset.get(span) or Span(doc, *span) for span in found]
    spans.extend(ent for ent in doc.ents if ent.label_ not in labels)
    doc.set_ents(sorted(spans), default="outside")
    if scores is None:
        return
    entity_scores = {}
    for ent in doc.ents:
        key = (ent.start, ent.end, ent.label_)
        entity_scores[key] = scores.get(key, 1.0 if ent.label_ not in labels else None)
        ent._.score = entity_scores[key]
    if spans_key is not None:
        doc.spans[spans_key] = span_group(doc, spans_key, {**scores, **entity_scores}, list(entity_scores), candidate_threshold)
