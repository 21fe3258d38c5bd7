"""The probability of each of LAC's entities under its own CRF: forward-backward (backends/forward_backward.py) over
the emission scores and transitions LAC's tagger decodes with, as crf_ner's `ent._.score`.

An entity covers ids first..last of one window LAC read (lac_analyzer.LacTagger). Its probability is that of the
paths tagging them L-B L-I ... L-I with the id after them not L-I (BIO, as crf_posteriors scores crf_ner's BIO
spans), summed exactly from alpha and beta. Where read_words cut the entity out of a longer word of LAC's (at an
emoji or a line break), the side of the cut is left open: its first id may be L-I too, or the id after it anything.
"""

from typing import List, NamedTuple, Sequence

import numpy
import torch

from ..backends.forward_backward import forward_backward


class EntityIds(NamedTuple):
    """An entity in the ids of the window it was read from."""

    piece: int  # the window's index in the emissions given
    first: int  # its first id
    last: int  # its last id (inclusive)
    begin_tag: int  # L-B's tag id
    inside_tag: int  # L-I's tag id
    open_start: bool  # the first id may be L-I too
    open_end: bool  # no condition on the id after the last


def entity_log_probs(
    emissions: Sequence[numpy.ndarray], crf_weights: numpy.ndarray, entities: Sequence[EntityIds]
) -> numpy.ndarray:
    """log P(entity | its window) under LAC's CRF, per entity (float64).

    emissions (Sequence[numpy.ndarray]): Each window's emission scores (n_ids, n_tags); only those the entities
        name are read (run together in one forward-backward, padded to the longest).
    crf_weights (numpy.ndarray): LAC's crfw (n_tags + 2, n_tags): start row, end row, transitions (from, to).
    entities (Sequence[EntityIds]): The entities.
    RETURNS (numpy.ndarray): One log probability per entity.
    """
    if not entities:
        return numpy.zeros((0,), dtype="float64")
    used = sorted({entity.piece for entity in entities})
    row_of = {piece: row for row, piece in enumerate(used)}
    lengths = numpy.asarray([len(emissions[piece]) for piece in used])
    n_tags = crf_weights.shape[1]
    emit = numpy.zeros((len(used), int(lengths.max()), n_tags), dtype="float64")
    for row, piece in enumerate(used):
        emit[row, : lengths[row]] = emissions[piece]
    weights = torch.as_tensor(numpy.asarray(crf_weights, dtype="float64"))
    start, end, transitions = weights[0], weights[1], weights[2:]
    mask = torch.as_tensor(numpy.arange(emit.shape[1])[None, :] < lengths[:, None])
    with torch.no_grad():
        passes = forward_backward(torch.from_numpy(emit), mask, transitions, start, end)
    alpha, beta, log_z = (t.numpy() for t in passes)
    T = transitions.numpy()
    rows = numpy.asarray([row_of[entity.piece] for entity in entities])
    first = numpy.asarray([entity.first for entity in entities])
    last = numpy.asarray([entity.last for entity in entities])
    B = numpy.asarray([entity.begin_tag for entity in entities])
    I = numpy.asarray([entity.inside_tag for entity in entities])
    open_start = numpy.asarray([entity.open_start for entity in entities])
    open_end = numpy.asarray([entity.open_end for entity in entities]) | (last >= lengths[rows] - 1)
    # shape: (windows, steps + 1, n_tags): prefix sums of the emissions, for the I tags' run first + 1 .. last
    sums = numpy.concatenate([numpy.zeros_like(emit[:, :1]), numpy.cumsum(emit, axis=1)], axis=1)
    inner = last - first
    inside = sums[rows, last + 1, I] - sums[rows, first + 1, I] + numpy.maximum(inner - 1, 0) * T[I, I]
    following = numpy.minimum(last + 1, lengths[rows] - 1)
    totals = []
    for start_tag in (B, I):
        # The paths through start_tag at first, then I up to last; the tag at last.
        score = alpha[rows, first, start_tag] + numpy.where(inner > 0, T[start_tag, I] + inside, 0.0)
        last_tag = numpy.where(inner > 0, I, start_tag)
        # shape: (entities, n_tags): the id after the last, any tag but L-I
        after = T[last_tag] + emit[rows, following] + beta[rows, following]
        after[numpy.arange(len(entities)), I] = -numpy.inf
        top = after.max(axis=1, keepdims=True)
        closed = top[:, 0] + numpy.log(numpy.exp(after - top).sum(axis=1))
        totals.append(score + numpy.where(open_end, beta[rows, last, last_tag], closed))
    total = numpy.where(open_start, numpy.logaddexp(totals[0], totals[1]), totals[0])
    return total - log_z[rows]


def entity_probabilities(
    emissions: Sequence[numpy.ndarray], crf_weights: numpy.ndarray, entities: Sequence[EntityIds]
) -> List[float]:
    """entity_log_probs as probabilities (at most 1)."""
    return numpy.minimum(1.0, numpy.exp(entity_log_probs(emissions, crf_weights, entities))).tolist()
