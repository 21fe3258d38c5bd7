"""Decoding for the `crf_ner` pipe: emission scores in token-budget chunks and windows, the CRF's best
paths under pre-set entities, and the entity probabilities of the spans.

Functions of the model and the tag set, not of the pipe, so that the pipe file keeps spaCy's contract
(predict, set_annotations, update...) and each step here can be read, and tested, on its own.
"""

import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy
from spacy.tokens import Doc, Span, SpanGroup
from thinc.api import Model, NumpyOps, Ops
from thinc.types import Floats2d, Ints1d

from .. import extensions  # noqa: F401  (registers ent._.score and doc._.uncertainty, which this sets)
from ..backends.precision import inference_precision
from ..layers.crf import crf_decode
from ..layers.crf_posteriors import entity_probabilities, token_marginals
from ..long_docs import Decoded, segment_emissions
from ..tags import TagSet, most_probable_spans, tags_to_spans
from .alignment import align_scores, align_spans

# (start token, end token, label) -> probability
SpanScores = Dict[Tuple[int, int, str], float]


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


def decode(model: Model, docs: List[Doc], tag_set: TagSet, long_doc_window: int, best_path: bool = True) -> Decoded:
    """Emissions, constraints and (if best_path) Viterbi paths of the docs' segments: whole
    docs, or a long doc's windows, each ending at a sentence end (those over one long sentence
    together; long_docs.segment_emissions).

    model (Model): The pipe's model, with a "crf" ref.
    docs (List[Doc]): The docs, with their pre-set entities (the paths keep them).
    tag_set (TagSet): The CRF's tags.
    long_doc_window (int): A doc of more tokens is tagged in windows of at most this many; 0: whole.
    best_path (bool): Compute the Viterbi paths.
    RETURNS (Decoded): The segments and what was computed for them.
    """
    decoded = segment_emissions(model, docs, tag_set, long_doc_window)
    if best_path:
        crf = model.get_ref("crf")
        # On the host: what reads the paths (spans, doc.ents) is Python, so no copy per doc to a device and back.
        decoded.paths = crf_decode(crf, decoded.emissions, decoded.allowed, on_host=True) if decoded.segments else []
    return decoded


def decode_in_precision(
    model: Model,
    docs: List[Doc],
    tag_set: TagSet,
    long_doc_window: int,
    precision: str,
    name: str,
    best_path: bool = True,
) -> Decoded:
    """decode, the emissions in a pipe's precision (backends.precision.inference_precision); it applies on
    the CPU only, and elsewhere the pipe (name) says so once."""
    if precision != "float32" and not isinstance(model.ops, NumpyOps):  # warnings shows it once
        warnings.warn(
            f"{name}: precision {precision!r} applies on the CPU; on this device the model predicts in float32."
        )
    with inference_precision(precision):
        return decode(model, docs, tag_set, long_doc_window, best_path=best_path)


def doc_paths(model: Model, n_docs: int, decoded: Decoded) -> List[Ints1d]:
    """Per doc, the tag ids of its segments' best paths, joined (decoded.paths must be set; numpy, as
    decode computes them)."""
    by_doc: List[List[Ints1d]] = [[] for _ in range(n_docs)]
    for (i, _, _), path in zip(decoded.segments, decoded.paths or []):
        by_doc[i].append(path)
    return [
        paths[0] if len(paths) == 1 else numpy.concatenate(paths) if paths else numpy.zeros((0,), dtype="int32")
        for paths in by_doc
    ]


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


def tag_marginals(
    model: Model, tag_set: TagSet, docs: List[Doc], decoded: Decoded, temperature: float
) -> List[Floats2d]:
    """Per doc, P(token t has tag j | doc) (n_tokens, n_tags), its segments' marginals joined (a long
    doc's segments are decoded apart, as their entity probabilities)."""
    found = token_marginals(
        model.get_ref("crf"), decoded.emissions, tag_set.scheme, decoded.allowed, temperature=temperature
    )
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


def span_group(
    doc: Doc, key: str, scores: SpanScores, entities: List[Tuple[int, int, str]], candidate_threshold: float
) -> SpanGroup:
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
        doc.spans[spans_key] = span_group(
            doc, spans_key, {**scores, **entity_scores}, list(entity_scores), candidate_threshold
        )
