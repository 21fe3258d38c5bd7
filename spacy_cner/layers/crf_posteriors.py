"""What the CRF knows beyond its best path: token marginals and the exact probability of each
entity span, by forward-backward over the same constrained scores that Viterbi decodes."""

from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy
import torch
from thinc.api import Model
from thinc.types import Floats1d, Floats2d
from torch.nn.utils import parametrize

from ..backends.batching import batches_by_budget, padded_buckets
from ..tags import TagSet, allowed_transitions
from ._torch import pad_batch, torch_module
from .crf import FORBIDDEN, AllowedTags, CRFInput
from ..backends.forward_backward import (
    ScaledLattice,
    forward_backward,
    log_forward_backward,
    pair_expectations,
    scaled_lattice,
)

# Padded positions (docs x longest) per forward-backward call of chain_posteriors (distillation's soft
# targets, on the CRF's device): a bound on one call's memory there.
LATTICE_BATCH_TOKENS = 8192
# The docs of one forward-backward call of the span probabilities: as many as fit a group of similar
# lengths (padded_buckets), at most this many (the memory of a call's (docs, steps, tags) float64 arrays).
LATTICE_MAX_DOCS = 256
# What one more call costs beside its padded steps, in steps of one doc: a step of the scaled passes
# costs its numpy calls' overhead more than its arithmetic (tens of docs' worth, with tens of tags).
LATTICE_GROUP_COST = 256
# Tokens that the candidate prefixes (_Lattice.candidates) grow by at a time: most stop within a few.
CANDIDATE_STEPS = 16


def span_log_probs(
    model: Model[CRFInput, Floats1d],
    emissions: List[Floats2d],
    spans: List[Sequence[Tuple[int, int, str]]],
    scheme: str,
    allowed: Optional[List[AllowedTags]] = None,
) -> List[numpy.ndarray]:
    """log P(span is an entity of its label | doc) under the CRF, exactly, per doc and span.

    Forward-backward in log space (float64), batched over docs of similar length on the
    CRF's device, over the same constrained scores that Viterbi decodes (allowed masks
    included). A span (start, end exclusive, label) is an entity when its tags are
    B-L I-L ... E-L (S-L for one token) in BIOES; in BIO, B-L I-L ... I-L with the next
    token not I-L.

    model (Model): A CRF layer.
    emissions (List[Floats2d]): Emission scores (length, n_tags) per doc.
    spans (List[Sequence[Tuple[int, int, str]]]): The spans to score, per doc.
    scheme (str): "BIOES" or "BIO", the scheme of the CRF's tag names.
    allowed (Optional[List[Floats2d]]): Optional per-token tag masks.
    RETURNS (List[numpy.ndarray]): Per doc, one log probability per span.
    """
    out = [numpy.zeros((0,), dtype="float64") for _ in emissions]
    lengths = [len(scores) if len(doc_spans) else 0 for scores, doc_spans in zip(emissions, spans)]
    for group, lattice in _lattices(model, emissions, lengths, allowed, scheme):
        keys = [(b, span) for b, i in enumerate(group) for span in spans[i]]
        log_probs = lattice.span_log_probs(keys)
        bounds = numpy.cumsum([0] + [len(spans[i]) for i in group])
        for b, i in enumerate(group):
            out[i] = log_probs[bounds[b] : bounds[b + 1]]
    return out


def entity_probabilities(
    model: Model[CRFInput, Floats1d],
    emissions: List[Floats2d],
    spans: List[Sequence[Tuple[int, int, str]]],
    scheme: str,
    threshold: float,
    allowed: Optional[List[AllowedTags]] = None,
    temperature: float = 1.0,
) -> List[Dict[Tuple[int, int, str], float]]:
    """The exact probability of each given span, and of every other span whose probability
    is at least threshold (overlapping allowed), per doc.

    Candidates come from the token marginals: an entity's probability is at most that of
    each of its tags, so only spans whose first, inside and last tags all reach the
    threshold are scored exactly (see span_log_probs).

    model, emissions, scheme, allowed: as span_log_probs.
    spans (List[Sequence[Tuple[int, int, str]]]): Spans to score whatever their
        probability (e.g. the Viterbi path's entities), per doc.
    threshold (float): The least probability of the other spans returned; above 1: none.
    temperature (float): Every score (emissions, transitions) is divided by it before the
        probabilities are computed (temperature scaling, Guo et al. 2017): above 1 flattens
        them, below 1 sharpens them; the best path is the same at any temperature.
    RETURNS (List[Dict[Tuple[int, int, str], float]]): Per doc, (start, end, label) -> probability.
    """
    out: List[Dict[Tuple[int, int, str], float]] = [{} for _ in emissions]
    lengths = [len(scores) for scores in emissions]
    for group, lattice in _lattices(model, emissions, lengths, allowed, scheme, temperature):
        given = [(b, span) for b, i in enumerate(group) for span in spans[i]]
        candidates = lattice.candidates(threshold) if threshold <= 1.0 else []
        keys = list(dict.fromkeys(given + candidates))
        given = set(given)
        probabilities = numpy.minimum(1.0, numpy.exp(lattice.span_log_probs(keys)))
        for (b, span), probability in zip(keys, probabilities.tolist()):
            if probability >= threshold or (b, span) in given:
                out[group[b]][span] = probability
    return out


def token_marginals(
    model: Model[CRFInput, Floats1d],
    emissions: List[Floats2d],
    scheme: str,
    allowed: Optional[List[AllowedTags]] = None,
    temperature: float = 1.0,
) -> List[numpy.ndarray]:
    """Per doc, P(token t has tag j | the doc) under the CRF, float64 (n_tokens, n_tags): one
    forward-backward pass, as entity_probabilities (same constraints and temperature).

    model, emissions, scheme, allowed, temperature: as entity_probabilities.
    RETURNS (List[numpy.ndarray]): Each doc's marginals; a row sums to 1.
    """
    n_tags = len(torch_module(model).tag_names)
    out = [numpy.zeros((len(scores), n_tags), dtype="float64") for scores in emissions]
    lengths = [len(scores) for scores in emissions]
    for group, lattice in _lattices(model, emissions, lengths, allowed, scheme, temperature):
        marginals = lattice.marginals()
        for b, i in enumerate(group):
            out[i] = marginals[b, : lengths[i]]
    return out


class ChainPosteriors(NamedTuple):
    """What the CRF's distribution over one sequence's tag sequences holds beyond its best path (float64):
    all a teacher-student KL over whole sequences needs (training.distill.loss).

    marginals: (length, n_tags), q(y_t = j).
    counts: (n_tags, n_tags), the expected transition counts sum_t q(y_t-1 = i, y_t = j).
    entropy: H(q) of the distribution over tag sequences, in nats.
    piece_counts: (n_pieces, n_tags, n_tags), the expected transition counts inside each range asked for
        (chain_posteriors' pieces); None when none were.
    piece_entropy: (n_pieces,), the entropy of the chain's marginal over each range; None as piece_counts.
    """

    marginals: numpy.ndarray
    counts: numpy.ndarray
    entropy: float
    piece_counts: Optional[numpy.ndarray] = None
    piece_entropy: Optional[numpy.ndarray] = None


def chain_posteriors(
    model: Model[CRFInput, Floats1d],
    emissions: List[Floats2d],
    allowed: Optional[List[AllowedTags]] = None,
    temperature: float = 1.0,
    pieces: Optional[Sequence[Optional[Sequence[Tuple[int, int]]]]] = None,
) -> List[ChainPosteriors]:
    """Per sequence, the CRF chain's token marginals, expected transition counts and entropy, by one
    forward-backward pass per group of similar lengths (_padded_groups, at most LATTICE_BATCH_TOKENS padded
    positions a group), on the CRF's device, every score divided by temperature, tags outside allowed (per
    token, when given) left out.

    model (Model): A CRF layer.
    emissions (List[Floats2d]): Emission scores (length, n_tags) per sequence, none empty.
    allowed (Optional[List[Floats2d]]): Per-token tag masks, e.g. of pre-set entities.
    temperature (float): Every CRF score is divided by it.
    pieces (Optional[Sequence[Optional[Sequence[Tuple[int, int]]]]]): Per sequence, None or [start, end)
        ranges that tile it: the chain's marginal over each too (piece_counts, piece_entropy).
    RETURNS (List[ChainPosteriors]): Per sequence.
    """
    module = torch_module(model)
    device = module.device
    lengths = [len(scores) for scores in emissions]
    out: List[Optional[ChainPosteriors]] = [None] * len(lengths)
    with torch.no_grad():
        transitions, start, end = _crf_scores(model, temperature, device)
        start_ok, transitions_ok, end_ok = (
            torch.from_numpy(a).to(device) for a in allowed_transitions(module.tag_names)
        )
        kept = [torch.where(ok, s, 0.0) for ok, s in ((transitions_ok, transitions), (start_ok, start), (end_ok, end))]
        groups = batches_by_budget(lengths, LATTICE_BATCH_TOKENS, by_length=True, padded=True, skip_empty=True)
        for group, emit, mask in _padded_groups(model, emissions, groups, allowed, temperature, device):
            alpha, beta, log_z = forward_backward(emit, mask, transitions, start, end)
            marginals = torch.exp(alpha + beta - log_z[:, None, None]) * mask.unsqueeze(-1)
            for b, i in enumerate(group):
                n = lengths[i]
                q = marginals[b, :n]
                counts = pair_expectations(
                    alpha[b, : n - 1],
                    emit[b, 1:n] + beta[b, 1:n] - log_z[b],
                    transitions,
                    torch.ones(n - 1, dtype=torch.float64, device=device),
                )
                # H(q) = log Z - E_q[s(y)] / T; q is 0 where emit is FORBIDDEN (0, not 0 * FORBIDDEN).
                score = (
                    torch.where(q > 0, q * emit[b, :n], 0.0).sum()
                    + (counts * kept[0]).sum()
                    + q[0] @ kept[1]
                    + q[-1] @ kept[2]
                )
                piece_counts = piece_entropy = None
                if pieces is not None and pieces[i] is not None:
                    piece_counts, piece_entropy = _chain_pieces(
                        alpha[b, :n], beta[b, :n], emit[b, :n], log_z[b], transitions, q, pieces[i]
                    )
                posteriors = ChainPosteriors(
                    q.cpu().numpy(), counts.cpu().numpy(), float(log_z[b] - score), piece_counts, piece_entropy
                )
                out[i] = posteriors
    if any(posteriors is None for posteriors in out):
        raise ValueError("chain_posteriors got an empty sequence: leave empty docs out.")
    return out


def _chain_pieces(alpha, beta, emit, log_z, transitions, marginals, ranges) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """One chain's marginal over each of ranges, as (counts, entropies): the pair marginals q(y_t-1, y_t)
    inside the range give its expected transition counts and, the marginal of a chain being a chain, its
    entropy H = sum_t H(y_t-1, y_t) - sum_(inner t) H(y_t) (one token: H(y_t)). Memory: one range's pairs."""

    def entropy(p: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        return -torch.where(p > 0, p * log_p, 0.0).sum()

    n_tags = transitions.shape[0]
    counts = numpy.zeros((len(ranges), n_tags, n_tags))
    entropies = numpy.zeros(len(ranges))
    for k, (start, end) in enumerate(ranges):
        q = marginals[start:end]
        if end - start == 1:
            entropies[k] = float(entropy(q, torch.log(q)))
            continue
        # shape: (end - start - 1, n_tags, n_tags), log q(y_t-1 = i, y_t = j) for t in start + 1 .. end - 1
        log_pairs = (
            alpha[start : end - 1, :, None]
            + transitions
            + (emit[start + 1 : end] + beta[start + 1 : end])[:, None, :]
            - log_z
        )
        pairs = torch.exp(log_pairs)
        counts[k] = pairs.sum(dim=0).cpu().numpy()
        inner = q[1:-1]
        entropies[k] = float(entropy(pairs, log_pairs) - entropy(inner, torch.log(inner)))
    return counts, entropies


class _Lattice:
    """The forward-backward scores (numpy, float64) of a group of docs padded to one length,
    for span probabilities. A span is keyed (doc's row in the group, (start, end, label)).

    alpha and beta are kept scaled (forward_backward.ScaledLattice: rows summing to 1 and their log
    scales): the marginals are their normalised products, and only the entries a span reads are taken
    to log space (log over the whole (batch, length, n_tags) arrays cost more than the passes)."""

    def __init__(self, emit, transitions, scaled: ScaledLattice, lengths, tag_set: TagSet) -> None:
        # shapes: emit, alpha, beta (batch, steps, n_tags); alpha_scale, beta_scale (batch, steps);
        # log_z, lengths (batch,)
        self.emit, self.transitions = emit, transitions
        self.alpha, self.alpha_scale, self.beta, self.beta_scale, self.log_z = scaled
        self.lengths, self.tag_set = numpy.asarray(lengths), tag_set

    def log_alpha(self, rows, steps, tags) -> numpy.ndarray:
        """log alpha at (rows, steps, tags), index arrays of one shape (-inf for forbidden tags)."""
        with numpy.errstate(divide="ignore"):
            return numpy.log(self.alpha[rows, steps, tags]) + self.alpha_scale[rows, steps]

    def log_beta(self, rows, steps, tags) -> numpy.ndarray:
        """log beta at (rows, steps, tags), as log_alpha."""
        with numpy.errstate(divide="ignore"):
            return numpy.log(self.beta[rows, steps, tags]) + self.beta_scale[rows, steps]

    def marginals(self) -> numpy.ndarray:
        """P(y_t = j) per (doc row, step, tag): alpha * beta normalised over the tags (each step's sum is
        Z); where the product underflows at a step, exp(log alpha + log beta - log Z) there."""
        product = self.alpha * self.beta
        totals = product.sum(axis=2, keepdims=True)
        with numpy.errstate(invalid="ignore", divide="ignore"):
            marginals = product / totals
        lost = ~(totals[:, :, 0] > 0)
        if lost.any():
            rows, steps = numpy.nonzero(lost)
            tags = numpy.arange(product.shape[2])[None, :]
            rows_, steps_ = rows[:, None], steps[:, None]
            log_p = self.log_alpha(rows_, steps_, tags) + self.log_beta(rows_, steps_, tags) - self.log_z[rows_]
            marginals[rows, steps] = numpy.exp(log_p)
        return marginals

    def span_log_probs(self, keys: Sequence[Tuple[int, Tuple[int, int, str]]]) -> numpy.ndarray:
        """log P(span is an entity) for each (doc row, span): the paths through its tags, over all paths.

        Vectorised over the spans of the group: a span's tags are fixed (B I .. I E, S, or
        B I .. I), so its score is alpha at the first tag, the transitions and inside
        emissions (prefix sums per label), and beta at the last tag; in BIO, beta is
        replaced by a sum over the next token's tags other than I-label.
        """
        if not len(keys):
            return numpy.zeros((0,), dtype="float64")
        tag_set, scheme = self.tag_set, self.tag_set.scheme
        label_ids = {label: k for k, label in enumerate(tag_set.labels)}
        rows = numpy.asarray([b for b, _ in keys])
        starts = numpy.asarray([span[0] for _, span in keys])
        lasts = numpy.asarray([span[1] - 1 for _, span in keys])
        ks = numpy.asarray([label_ids[span[2]] for _, span in keys])
        lengths = self.lengths[rows]
        inner_tokens = lasts - starts
        T, emit = self.transitions, self.emit
        B, I = tag_set.columns["B"][ks], tag_set.columns["I"][ks]
        # Prefix sums of the I-tag emissions; forbidden entries counted apart (their FORBIDDEN
        # scores would swamp the float64 sums).
        inside = emit[:, :, tag_set.columns["I"]]
        forbidden = inside <= FORBIDDEN / 2
        zeros = numpy.zeros((inside.shape[0], 1, inside.shape[2]))
        sums = numpy.concatenate([zeros, numpy.cumsum(numpy.where(forbidden, 0.0, inside), axis=1)], axis=1)
        counts = numpy.concatenate([zeros, numpy.cumsum(forbidden, axis=1)], axis=1)

        def inside_sum(first: numpy.ndarray, stop: numpy.ndarray) -> numpy.ndarray:
            total = sums[rows, stop, ks] - sums[rows, first, ks]
            return numpy.where(counts[rows, stop, ks] > counts[rows, first, ks], -numpy.inf, total)

        with numpy.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if scheme == "BIOES":
                S, E = tag_set.columns["S"][ks], tag_set.columns["E"][ks]
                single = self.log_alpha(rows, starts, S) + self.log_beta(rows, starts, S)
                steps = numpy.where(
                    inner_tokens == 1, T[B, E], T[B, I] + numpy.maximum(inner_tokens - 2, 0) * T[I, I] + T[I, E]
                )
                first = self.log_alpha(rows, starts, B)
                longer = first + inside_sum(starts + 1, numpy.maximum(lasts, starts + 1)) + steps
                longer = longer + emit[rows, lasts, E] + self.log_beta(rows, lasts, E)
                scores = numpy.where(inner_tokens == 0, single, longer)
            else:
                steps = numpy.where(inner_tokens == 0, 0.0, T[B, I] + numpy.maximum(inner_tokens - 1, 0) * T[I, I])
                last_tag = numpy.where(inner_tokens == 0, B, I)
                scores = self.log_alpha(rows, starts, B) + inside_sum(starts + 1, lasts + 1) + steps
                following = numpy.minimum(lasts + 1, lengths - 1)
                # shape: (n_spans, n_tags): the next token's tags, I-label excluded
                tags = numpy.arange(T.shape[0])[None, :]
                after = T[last_tag] + emit[rows, following] + self.log_beta(rows[:, None], following[:, None], tags)
                after[numpy.arange(len(keys)), I] = -numpy.inf
                top = after.max(axis=1)
                shift = numpy.where(numpy.isfinite(top), top, 0.0)[:, None]
                summed = numpy.where(
                    numpy.isfinite(top), top + numpy.log(numpy.exp(after - shift).sum(axis=1)), -numpy.inf
                )
                ending = self.log_beta(rows, lasts, last_tag)
                scores = scores + numpy.where(lasts + 1 >= lengths, ending, summed)
        return scores - self.log_z[rows]

    def candidates(self, threshold: float) -> List[Tuple[int, Tuple[int, int, str]]]:
        """(doc row, span) for a superset of the spans whose probability is >= threshold, at most
        len(doc) / threshold of them per label (memory linear in the doc's length).

        Why not the spans whose every tag's marginal reaches the threshold: on a long run of
        similar characters (no punctuation) those are quadratic in number ("李" * 5,000: 12M spans,
        4 GB). Here a span starting at s grows token by token while the probability of its prefix
        (tag B at s, I up to t, whatever follows) reaches the threshold: every span that
        continues the prefix is at most that probable, the prefix's probability only falls as t
        grows, and for each t the prefixes from different starts are disjoint events (at most
        1 / threshold of them reach it). All prefixes grow together, CANDIDATE_STEPS tokens at a time
        (array operations over the prefixes still growing: a handful per block, whatever their number).
        """
        steps = self.alpha.shape[1]
        real = numpy.arange(steps)[None, :] < self.lengths[:, None]
        # shape: (batch, steps, n_tags), the tags whose marginal probability reaches the threshold
        above = (self.marginals() >= threshold) & real[:, :, None]
        columns, labels, scheme = self.tag_set.columns, self.tag_set.labels, self.tag_set.scheme
        T, emit, log_z = self.transitions, self.emit, self.log_z
        floor = numpy.log(threshold) if threshold > 0 else -numpy.inf
        found: List[Tuple[int, int, int, int]] = []  # (doc row, start, end, label index)
        if scheme == "BIOES":
            b, t, k = numpy.nonzero(above[:, :, columns["S"]])
            found.extend(zip(b.tolist(), t.tolist(), (t + 1).tolist(), k.tolist()))
        rows, starts, ks = numpy.nonzero(above[:, :, columns["B"]])
        if scheme == "BIO":
            found.extend(zip(rows.tolist(), starts.tolist(), (starts + 1).tolist(), ks.tolist()))
        # log of the paths' scores up to t with B at start and I after it
        path, offset = self.log_alpha(rows, starts, columns["B"][ks]), 0
        while len(rows):
            B, I = columns["B"][ks][:, None], columns["I"][ks][:, None]
            # shape: (prefixes, CANDIDATE_STEPS): the next tokens t, the prefix growing to I at each
            t = starts[:, None] + offset + numpy.arange(1, CANDIDATE_STEPS + 1)[None, :]
            inside = t < self.lengths[rows][:, None]
            t = numpy.minimum(t, self.lengths[rows][:, None] - 1)
            steps = T[I, I] + emit[rows[:, None], t, I]
            if offset == 0:
                steps[:, :1] = T[B, I] + emit[rows[:, None], t[:, :1], I]
            # Summed one step after another from the prefix's score, as a loop over t would.
            paths = numpy.cumsum(numpy.concatenate([path[:, None], steps], axis=1), axis=1)[:, 1:]
            with numpy.errstate(invalid="ignore"):
                # no span continuing B I ... I (at t) reaches the threshold: the prefix stops growing
                growing = ~(paths + (self.log_beta(rows[:, None], t, I) - log_z[rows][:, None]) < floor) & inside
            growing = numpy.logical_and.accumulate(growing, axis=1)
            if scheme == "BIOES":  # B I ... I E: an E at t ends a span where the prefix reached t - 1
                reached = numpy.concatenate([numpy.ones_like(growing[:, :1]), growing[:, :-1]], axis=1) & inside
                ends = reached & above[rows[:, None], t, columns["E"][ks][:, None]]
            else:  # B I ... I
                ends = growing
            b, k = numpy.nonzero(ends)
            found.extend(zip(rows[b].tolist(), starts[b].tolist(), (t[b, k] + 1).tolist(), ks[b].tolist()))
            going = growing[:, -1]
            rows, starts, ks, path = rows[going], starts[going], ks[going], paths[going, -1]
            offset += CANDIDATE_STEPS
        return [(b, (start, end, labels[k])) for b, start, end, k in found]


def _lattices(
    model: Model,
    emissions: List[Floats2d],
    lengths: Sequence[int],
    allowed: Optional[List[AllowedTags]],
    scheme: str,
    temperature: float = 1.0,
):
    """(doc indices, _Lattice) for each group of docs of non-zero length and similar length (_padded_groups),
    every score divided by the temperature; the CRF's tag names are read in the given scheme.

    On the CPU: the step loops of forward-backward run there anyway (forward_backward.scaled_lattice) and
    what reads the lattice is numpy, so a group's emissions are copied from a device once. The groups are
    the cut of the docs sorted by length that computes the fewest padded steps (backends.batching.
    padded_buckets, a group's fixed cost LATTICE_GROUP_COST steps)."""
    crf = torch_module(model)
    tag_set = TagSet.from_names(crf.tag_names, scheme)
    cpu = torch.device("cpu")
    with torch.no_grad():
        scores = _crf_scores(model, temperature, cpu)
        transitions = scores[0].numpy()
        kept = [i for i, length in enumerate(lengths) if length]
        buckets = padded_buckets([lengths[i] for i in kept], LATTICE_MAX_DOCS, LATTICE_GROUP_COST)
        groups = [[kept[j] for j in bucket] for bucket in buckets]
        for group, emit, mask in _padded_groups(model, emissions, groups, allowed, temperature, cpu):
            scaled = scaled_lattice(emit, mask, *scores)
            if scaled is None:  # the scaled sums underflow: log space, then scaled from it
                scaled = _scaled_from_logs(*log_forward_backward(emit, mask, *scores))
            scaled = ScaledLattice(*(t.numpy() for t in scaled))
            yield group, _Lattice(emit.numpy(), transitions, scaled, [lengths[i] for i in group], tag_set)


def _crf_scores(model: Model, temperature: float, device: torch.device) -> Tuple[torch.Tensor, ...]:
    """The CRF's transition, start and end scores (float64, on device), divided by the temperature."""
    if not temperature > 0:
        raise ValueError(f"The CRF's temperature must be positive, got {temperature}.")
    crf = torch_module(model)
    with torch.no_grad(), parametrize.cached():
        return tuple(
            t.double().to(device) / temperature for t in (crf.transitions, crf.start_transitions, crf.end_transitions)
        )


def _padded_groups(
    model: Model,
    emissions: List[Floats2d],
    groups: Sequence[List[int]],
    allowed: Optional[List[AllowedTags]],
    temperature: float,
    device: torch.device,
) -> Iterator[Tuple[List[int], torch.Tensor, torch.Tensor]]:
    """(doc indices, emissions, mask) for each group of docs (none empty), the group's emissions padded on
    device (float64), divided by the temperature, FORBIDDEN outside allowed: the batching loop of the span
    probabilities (_lattices) and of chain_posteriors, each grouping the docs its own way."""
    for group in groups:
        with torch.no_grad():
            emit, mask = pad_batch(model, [emissions[i] for i in group], requires_grad=False, device=device)
            emit = emit.double() / temperature
            if allowed is not None:
                allowed_mask, _ = pad_batch(model, [allowed[i] for i in group], requires_grad=False, device=device)
                emit = emit.masked_fill(allowed_mask == 0, FORBIDDEN)
        yield group, emit, mask


def _scaled_from_logs(alpha: torch.Tensor, beta: torch.Tensor, log_z: torch.Tensor) -> ScaledLattice:
    """log alpha and log beta as a ScaledLattice: each row divided by its largest entry's exp."""

    def scaled(log_values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        top = log_values.max(dim=2).values
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        values = torch.exp(log_values - top.unsqueeze(2))
        totals = values.sum(dim=2)
        return values / totals.unsqueeze(2), top + torch.log(totals)

    alpha, alpha_scale = scaled(alpha)
    beta, beta_scale = scaled(beta)
    return ScaledLattice(alpha, alpha_scale, beta, beta_scale, log_z)
