"""A linear-chain CRF (pytorch-crf) whose transitions obey the tag scheme."""
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy
import torch
from thinc.api import ArgsKwargs, Model, registry, torch2xp, xp2torch
from thinc.shims.shim import Shim
from thinc.types import Floats1d, Floats2d, Ints1d
from torch.nn.utils import parametrize
from torchcrf import CRF as TorchCRF

from ..tags import TagSet, allowed_transitions
from ._torch import RebuildableModule, pad_batch, set_torch_module, torch_module, wrap_rebuildable

# Per-doc (length, n_tags) masks: 1 where a tag is allowed at a token.
AllowedTags = Floats2d
CRFInput = Tuple[List[Floats2d], List[AllowedTags]]
# Padded positions (batch x longest) per Viterbi call: docs of similar length decode
# together, so that one long doc does not pad a whole batch to its length.
DECODE_BATCH_TOKENS = 65536
# The same for the forward-backward of the entity probabilities, whose steps cost more per
# padded position (two passes, float64): on Resume's test set (33 tags, docs of 1-167
# characters in batches of 256) 0.05 s instead of 0.12 s with groups of 65,536; the same
# (within the noise) on Youku, E-commerce, Taobao and People's Daily (9-17 tags).
LATTICE_BATCH_TOKENS = 8192
# The score of a forbidden transition or tag: low enough that no path using
# one can win, finite so that log-sum-exp stays free of NaN.
FORBIDDEN = -1e9
# Multiply-adds of the largest matrix product the CRF's forward-backward makes at once: OpenBLAS
# (numpy's) splits a product of more than 4 x 65,536 over its threads (interface/gemm.c).
ONE_THREAD_PRODUCT = 4 * 65536


@registry.layers("spacy-cner.CRF.v1")
def CRF() -> Model[CRFInput, Floats1d]:
    """Log-likelihood of the gold tags under a linear-chain CRF, per doc.

    The input is the emission scores and, per token, a mask of the tags the gold
    standard allows: one tag where it is known, every tag where the annotation is
    missing, so partially annotated docs are marginalised rather than taught "O".
    Transitions the tag scheme forbids (e.g. O -> I-X) are fixed to FORBIDDEN;
    decode with `crf_decode`. The tag names are given to `initialize` as Y.
    """
    return wrap_rebuildable(
        "crf",
        ConstrainedCRF(tag_names=[]),
        _convert_inputs,
        _convert_outputs,
        init=init,
        dims={"nO": None},
    )


def init(model: Model, X: Optional[CRFInput] = None, Y: Optional[Sequence[str]] = None) -> None:
    """Build the CRF for the tag names given as Y."""
    if Y is None:
        if torch_module(model).tag_names:
            return
        raise ValueError("The CRF layer needs the tag names as Y in initialize(X, Y).")
    model.set_dim("nO", len(Y), force=True)
    set_torch_module(model, ConstrainedCRF(tag_names=list(Y)))


def resize_crf(model: Model, tag_names: Sequence[str]) -> None:
    """Give an initialized CRF layer new tag names, keeping the learned scores between the tags
    it had (matched by name); scores of the new tags start at 0."""
    old_crf = torch_module(model)
    new_crf = ConstrainedCRF(tag_names=list(tag_names))
    old_index = {tag: i for i, tag in enumerate(old_crf.tag_names)}
    pairs = [(i, old_index[tag]) for i, tag in enumerate(tag_names) if tag in old_index]
    new_rows = torch.as_tensor([i for i, _ in pairs])
    old_rows = torch.as_tensor([j for _, j in pairs])
    with torch.no_grad():
        for name in ("start_transitions", "transitions", "end_transitions"):
            old = old_crf.parametrizations[name].original
            new = new_crf.parametrizations[name].original.to(old.device)
            new.zero_()
            if name == "transitions":
                new[new_rows.unsqueeze(1), new_rows] = old[old_rows.unsqueeze(1), old_rows]
            else:
                new[new_rows] = old[old_rows]
    set_torch_module(model, new_crf)
    # New weights under a new id: an optimizer that trained the old ones (nlp.resume_training()
    # after add_label, as with spaCy's ner) keeps its moments under the old id, not these shapes.
    shim = model.shims[0]
    with Shim.global_id_lock:
        Shim.global_id += 1
        shim.id = Shim.global_id
    model.set_dim("nO", len(tag_names), force=True)


def crf_decode(
    model: Model[CRFInput, Floats1d],
    emissions: List[Floats2d],
    allowed: Optional[List[AllowedTags]] = None,
) -> List[Ints1d]:
    """The best tag-id sequence per doc, by Viterbi, within the allowed tags.

    model (Model): A CRF layer.
    emissions (List[Floats2d]): Emission scores (length, n_tags) per doc.
    allowed (Optional[List[Floats2d]]): Optional per-token tag masks, e.g. for
        entities set by an earlier component.
    RETURNS (List[Ints1d]): The decoded tag ids; empty docs give empty arrays.
    """
    paths = [model.ops.alloc1i(0) for _ in emissions]
    crf = torch_module(model)
    device = crf.device
    for group in length_groups([len(scores) for scores in emissions], DECODE_BATCH_TOKENS):
        scores, mask = pad_batch(model, [emissions[i] for i in group], requires_grad=False, device=device)
        if allowed is not None:
            allowed_mask, _ = pad_batch(model, [allowed[i] for i in group], requires_grad=False, device=device)
            scores = scores.masked_fill(allowed_mask == 0, FORBIDDEN)
        with torch.no_grad():
            decoded = crf.viterbi(scores, mask)
        for i, path in zip(group, decoded):
            paths[i] = model.ops.asarray1i(path)
    return paths


def length_groups(lengths: Sequence[int], max_tokens: int) -> List[List[int]]:
    """Indices of the non-zero lengths, sorted by length and grouped so that a group padded
    to its longest item holds at most max_tokens (or is a single item).
    """
    order = sorted((i for i, length in enumerate(lengths) if length), key=lambda i: lengths[i])
    groups: List[List[int]] = []
    for i in order:
        if groups and lengths[i] * (len(groups[-1]) + 1) <= max_tokens:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


class ConstrainedCRF(TorchCRF, RebuildableModule):
    """pytorch-crf's CRF with scheme-forbidden transitions masked out.

    The masks are applied through torch parametrizations, so every pytorch-crf
    routine (score, partition function, Viterbi) sees the constrained scores.
    """

    def __init__(self, tag_names: List[str]):
        # A placeholder CRF has one tag until init gives it the tag names.
        super().__init__(max(len(tag_names), 1), batch_first=True)
        self.hparams = {"tag_names": list(tag_names)}
        self.tag_names = list(tag_names)
        if not tag_names:
            return
        start, transitions, end = allowed_transitions(tag_names)
        for name, allowed in (
            ("start_transitions", start),
            ("transitions", transitions),
            ("end_transitions", end),
        ):
            parametrize.register_parametrization(self, name, _Forbid(allowed))

    @property
    def device(self) -> torch.device:
        return self.end_transitions.device

    def forward(self, emissions: torch.Tensor, mask: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Log-likelihood of the allowed paths per sequence.

        emissions (Tensor): Scores, shape (batch, length, n_tags).
        mask (Tensor): True for real tokens, shape (batch, length); mask[:, 0] all True.
        allowed (Tensor): True where a tag agrees with the gold, shape (batch, length, n_tags).
        RETURNS (Tensor): log P(allowed paths), shape (batch,).
        """
        with parametrize.cached():
            return _AllowedPathsLogLikelihood.apply(
                emissions, mask, allowed, self.start_transitions, self.transitions, self.end_transitions
            )

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[numpy.ndarray]:
        """The best path per sequence, shapes as in forward.

        pytorch-crf's _viterbi_decode, with the backtrace vectorised over the batch (its own
        reads one tensor element per sequence and step with .item()) and the back-pointers
        kept as int16 (a quarter of the memory). Measured with 33 tags on a busy 2-core
        machine: 64 windows of 512 tokens in 0.14-0.26 s against pytorch-crf's 0.21-0.40 s;
        one 20,000-token sequence within the noise of pytorch-crf's time (0.9-1.4 s).
        """
        n_docs, n_steps, n_tags = emissions.shape
        lengths = mask.sum(dim=1).cpu().numpy()
        # shape: (length - 1, batch, n_tags): the best previous tag per step and tag
        history = [torch.zeros((0, n_docs, n_tags), dtype=torch.int16, device=emissions.device)]
        pending = []
        # Time first, as pytorch-crf: each step reads contiguous rows.
        steps, step_mask = emissions.transpose(0, 1).contiguous(), mask.transpose(0, 1).unsqueeze(2).contiguous()
        with parametrize.cached():
            transitions = self.transitions
            score = self.start_transitions + steps[0]
            for i in range(1, n_steps):
                next_score, indices = (score.unsqueeze(2) + transitions + steps[i].unsqueeze(1)).max(dim=1)
                score = torch.where(step_mask[i], next_score, score)
                pending.append(indices)
                if len(pending) == 1024 or i == n_steps - 1:
                    history.append(torch.stack(pending).to(torch.int16))
                    pending = []
            score = score + self.end_transitions
        history = torch.cat(history).cpu().numpy()
        tags = numpy.zeros((n_docs, n_steps), dtype=numpy.int64)
        rows = numpy.arange(n_docs)
        current = score.argmax(dim=1).cpu().numpy()
        tags[rows, lengths - 1] = current
        for i in range(n_steps - 1, 0, -1):
            active = i < lengths
            current = numpy.where(active, history[i - 1, rows, current], current)
            tags[rows[active], i - 1] = current[active]
        return [tags[d, : lengths[d]] for d in range(n_docs)]


class _AllowedPathsLogLikelihood(torch.autograd.Function):
    """log P(allowed paths | doc) per doc = log Z(allowed) - log Z(all), with its gradient read off
    the marginals of one forward-backward pass (float64) over both.

    Why not autograd through the forward algorithm (as pytorch-crf): its backward replays each
    step's small tensor operations, and on CPU those cost more than the arithmetic: the loss took
    a quarter of a training step of the default config. The gradient of log Z is the expectation
    of the score's parts (Sutton and McCallum 2012, eq. 1.33): d log Z / d emission[t, j] =
    P(y_t = j), d log Z / d transition[i, j] = sum_t P(y_t-1 = i, y_t = j), and the start and
    end transitions' the first and last tags' marginals, under Z over all paths or over the
    allowed ones. _forward_backward gives alpha, beta and log Z (log space where the scaled sums
    underflow); forbidden scores and disallowed tags come out with zero probability.
    """

    @staticmethod
    def forward(ctx, emissions, mask, allowed, start, transitions, end):
        n_docs = emissions.shape[0]
        emit = emissions.detach().double()
        # Padding allows every tag: its steps are never read.
        restricted = emit.masked_fill(~(allowed | ~mask.unsqueeze(-1)), FORBIDDEN)
        # shape: (2 * batch, length, n_tags): every path, then the allowed ones
        both, both_mask = torch.cat([emit, restricted]), torch.cat([mask, mask])
        scores = tuple(t.detach().double() for t in (transitions, start, end))
        alpha, beta, log_z = _forward_backward(both, both_mask, *scores)
        ctx.save_for_backward(both, both_mask, alpha, beta, log_z, scores[0])
        ctx.dtypes = (emissions.dtype, start.dtype, transitions.dtype, end.dtype)
        return (log_z[n_docs:] - log_z[:n_docs]).to(emissions.dtype)

    @staticmethod
    def backward(ctx, d_log_likelihood):
        both, mask, alpha, beta, log_z, transitions = ctx.saved_tensors
        emissions_dtype, start_dtype, transitions_dtype, end_dtype = ctx.dtypes
        n_docs = d_log_likelihood.shape[0]
        # d loss / d log Z per row: minus for every path's, plus for the allowed paths'.
        weight = torch.cat([-d_log_likelihood, d_log_likelihood]).double()
        # shape: (2 * batch, length, n_tags), P(y_t = j), zero at padding
        marginals = torch.exp(alpha + beta - log_z[:, None, None]) * mask.unsqueeze(-1)
        weighted = marginals * weight[:, None, None]
        d_emissions = weighted[:n_docs] + weighted[n_docs:]
        last = mask.sum(dim=1) - 1
        d_start = weighted[:, 0].sum(dim=0)
        d_end = weighted[torch.arange(len(last), device=last.device), last].sum(dim=0)
        # Pairs (t - 1, t) within each doc: alpha[t - 1, i] + transition[i, j] + emission[t, j] + beta[t, j].
        pairs = mask[:, 1:]
        d_transitions = _pair_expectations(
            alpha[:, :-1][pairs],
            (both[:, 1:] + beta[:, 1:] - log_z[:, None, None])[pairs],
            transitions,
            weight.unsqueeze(1).expand(-1, pairs.shape[1])[pairs],
        )
        return (
            d_emissions.to(emissions_dtype),
            None,
            None,
            d_start.to(start_dtype),
            d_transitions.to(transitions_dtype),
            d_end.to(end_dtype),
        )


def _pair_expectations(
    before: torch.Tensor, after: torch.Tensor, transitions: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """sum_n weight[n] * exp(before[n, i] + transitions[i, j] + after[n, j]), shape (n_tags, n_tags).

    One matrix product: exp(transitions) * (exp(before).T @ (weight * exp(after))), each row's
    offset split between its two sides so that neither overflows; where a side does anyway (a
    step where the likely tags before cannot reach the likely tags after, by over 1,400 nats),
    the terms are summed one by one in blocks, each at most 1 (they are probabilities)."""
    offset = (before.max(dim=1, keepdim=True).values - after.max(dim=1, keepdim=True).values) / 2
    left, right = torch.exp(before - offset), torch.exp(after + offset) * weight.unsqueeze(1)
    total = torch.exp(transitions) * (left.T @ right)
    if torch.isfinite(total).all():
        return total
    total = torch.zeros_like(transitions)
    for start in range(0, len(before), 1024):
        block = slice(start, start + 1024)
        # shape: (block, n_tags, n_tags)
        terms = torch.exp(before[block].unsqueeze(2) + transitions + after[block].unsqueeze(1))
        total += (terms * weight[block, None, None]).sum(dim=0)
    return total


class _Forbid(torch.nn.Module):
    """Parametrization that fixes the forbidden entries of a score tensor."""

    def __init__(self, allowed: numpy.ndarray):
        super().__init__()
        # Not persistent: rebuilt from the tag names, and absent from the
        # parameter dicts that thinc swaps in for averaged weights.
        self.register_buffer("allowed", torch.from_numpy(allowed.copy()), persistent=False)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(~self.allowed, FORBIDDEN)


def _convert_inputs(model: Model, X: CRFInput, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    emissions, allowed = X
    if any(len(scores) == 0 for scores in emissions):
        raise ValueError("The CRF layer got an empty doc: leave empty docs out of the batch.")
    device = torch_module(model).device
    scores, mask = pad_batch(model, emissions, requires_grad=is_train, device=device)
    allowed_mask, _ = pad_batch(model, allowed, requires_grad=False, device=device)
    lengths = [len(scores_i) for scores_i in emissions]

    def backprop(d_inputs: ArgsKwargs) -> Tuple[List[Floats2d], List[AllowedTags]]:
        d_scores = torch2xp(d_inputs.args[0])
        return model.ops.unpad(d_scores, lengths), allowed

    args = (scores, mask, allowed_mask > 0)
    return ArgsKwargs(args=args, kwargs={}), backprop


def _convert_outputs(model: Model, X_Ytorch, is_train: bool) -> Tuple[Floats1d, Callable]:
    _, log_likelihood = X_Ytorch

    def backprop(d_log_likelihood: Floats1d) -> ArgsKwargs:
        grad = xp2torch(d_log_likelihood, device=log_likelihood.device)
        return ArgsKwargs(args=(log_likelihood,), kwargs={"grad_tensors": grad})

    return torch2xp(log_likelihood.detach()), backprop


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
        marginals = numpy.exp(lattice.alpha + lattice.beta - lattice.log_z[:, None, None])
        for b, i in enumerate(group):
            out[i] = marginals[b, : lengths[i]]
    return out


class _Lattice:
    """The forward-backward scores (numpy, float64) of a group of docs padded to one length,
    for span probabilities. A span is keyed (doc's row in the group, (start, end, label))."""

    def __init__(self, emit, transitions, alpha, beta, log_z, lengths, tag_set: TagSet) -> None:
        # shapes: emit, alpha, beta (batch, steps, n_tags); log_z, lengths (batch,)
        self.emit, self.transitions, self.alpha, self.beta = emit, transitions, alpha, beta
        self.log_z, self.lengths, self.tag_set = log_z, numpy.asarray(lengths), tag_set

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
        T, emit, alpha, beta = self.transitions, self.emit, self.alpha, self.beta
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

        with numpy.errstate(invalid="ignore", over="ignore"):
            if scheme == "BIOES":
                S, E = tag_set.columns["S"][ks], tag_set.columns["E"][ks]
                single = alpha[rows, starts, S] + beta[rows, starts, S]
                steps = numpy.where(
                    inner_tokens == 1, T[B, E], T[B, I] + numpy.maximum(inner_tokens - 2, 0) * T[I, I] + T[I, E]
                )
                longer = alpha[rows, starts, B] + inside_sum(starts + 1, numpy.maximum(lasts, starts + 1)) + steps
                longer = longer + emit[rows, lasts, E] + beta[rows, lasts, E]
                scores = numpy.where(inner_tokens == 0, single, longer)
            else:
                steps = numpy.where(inner_tokens == 0, 0.0, T[B, I] + numpy.maximum(inner_tokens - 1, 0) * T[I, I])
                last_tag = numpy.where(inner_tokens == 0, B, I)
                scores = alpha[rows, starts, B] + inside_sum(starts + 1, lasts + 1) + steps
                following = numpy.minimum(lasts + 1, lengths - 1)
                # shape: (n_spans, n_tags): the next token's tags, I-label excluded
                after = T[last_tag] + emit[rows, following] + beta[rows, following]
                after[numpy.arange(len(keys)), I] = -numpy.inf
                top = after.max(axis=1)
                shift = numpy.where(numpy.isfinite(top), top, 0.0)[:, None]
                summed = numpy.where(numpy.isfinite(top), top + numpy.log(numpy.exp(after - shift).sum(axis=1)), -numpy.inf)
                scores = scores + numpy.where(lasts + 1 >= lengths, beta[rows, lasts, last_tag], summed)
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
        1 / threshold of them reach it).
        """
        steps = self.alpha.shape[1]
        real = numpy.arange(steps)[None, :] < self.lengths[:, None]
        # shape: (batch, steps, n_tags), the tags whose marginal probability reaches the threshold
        above = (numpy.exp(self.alpha + self.beta - self.log_z[:, None, None]) >= threshold) & real[:, :, None]
        columns, labels, scheme = self.tag_set.columns, self.tag_set.labels, self.tag_set.scheme
        T, emit, alpha, beta, log_z = self.transitions, self.emit, self.alpha, self.beta, self.log_z
        floor = numpy.log(threshold) if threshold > 0 else -numpy.inf
        found = []
        if scheme == "BIOES":
            for b, t, k in zip(*(a.tolist() for a in numpy.nonzero(above[:, :, columns["S"]]))):
                found.append((b, (t, t + 1, labels[k])))
        for b, start, k in zip(*(a.tolist() for a in numpy.nonzero(above[:, :, columns["B"]]))):
            label, B, I = labels[k], int(columns["B"][k]), int(columns["I"][k])
            if scheme == "BIO":
                found.append((b, (start, start + 1, label)))
            last = above[b, :, columns["E"][k]] if scheme == "BIOES" else None
            # log of the paths' scores up to t with B at start and I after it, and the tag at t
            path, tag = float(alpha[b, start, B]), B
            for t in range(start + 1, int(self.lengths[b])):
                if last is not None and last[t]:
                    found.append((b, (start, t + 1, label)))  # B I ... I E
                path += float(T[tag, I] + emit[b, t, I])
                tag = I
                if path + float(beta[b, t, I] - log_z[b]) < floor:
                    break  # no span continuing B I ... I (at t) reaches the threshold
                if last is None:
                    found.append((b, (start, t + 1, label)))  # B I ... I
        return found


def _lattices(
    model: Model,
    emissions: List[Floats2d],
    lengths: Sequence[int],
    allowed: Optional[List[AllowedTags]],
    scheme: str,
    temperature: float = 1.0,
):
    """(doc indices, _Lattice) for each group of docs of non-zero length and similar length,
    forward-backward run on the CRF's device, every score divided by the temperature; the
    CRF's tag names are read in the given scheme."""
    if not temperature > 0:
        raise ValueError(f"The CRF's temperature must be positive, got {temperature}.")
    crf = torch_module(model)
    tag_set = TagSet.from_names(crf.tag_names, scheme)
    with torch.no_grad(), parametrize.cached():
        scores = tuple(
            t.double() / temperature for t in (crf.transitions, crf.start_transitions, crf.end_transitions)
        )
        transitions = scores[0].cpu().numpy()
        for group in length_groups(lengths, LATTICE_BATCH_TOKENS):
            emit, mask = pad_batch(model, [emissions[i] for i in group], requires_grad=False, device=crf.device)
            emit = emit.double() / temperature
            if allowed is not None:
                allowed_mask, _ = pad_batch(model, [allowed[i] for i in group], requires_grad=False, device=crf.device)
                emit = emit.masked_fill(allowed_mask == 0, FORBIDDEN)
            alpha, beta, log_z = (t.cpu().numpy() for t in _forward_backward(emit, mask, *scores))
            yield group, _Lattice(emit.cpu().numpy(), transitions, alpha, beta, log_z, [lengths[i] for i in group], tag_set)


def _forward_backward(emit, mask, transitions, start, end):
    """alpha[b, t, j]: log-sum of the paths over 0..t ending in j (emission t included); beta[b,
    t, j]: of the continuations after t from j (end transition included); log Z per doc.
    alpha at padding repeats the last real step's; beta there is the end transition.

    Computed in probability space, each step one matrix product with the row sums moved
    into a log scale (the scaled forward-backward of Rabiner 1989; 5-10x faster on CPUs than
    log-sum-exp over (batch, n_tags, n_tags)); forbidden entries come out as -inf. A batch
    whose scaled sums underflow (only with extreme scores) is redone in log space."""
    scaled = _scaled_forward_backward(emit, mask, transitions, start, end)
    if scaled is not None:
        return scaled
    return _log_forward_backward(emit, mask, transitions, start, end)


def _scaled_forward_backward(emit, mask, transitions, start, end):
    """The scaled passes run every doc of the batch over all steps, without masks (the fewest
    array operations per step: a step's cost is mostly their overhead); a doc's steps after its
    end compute garbage that is never read. The backward pass runs over each doc reversed, so
    that every doc starts it at step 0. Then each doc's real steps are gathered, the padding
    taking the values of _log_forward_backward.

    The two step loops run in numpy on the CPU, time-major (each step's rows one contiguous
    block, written in place): a numpy operation on a (batch, n_tags) array costs a fraction of a
    torch one's dispatch, and a device would launch a kernel per operation: the function ran 1.5x
    as fast on one CPU thread (21 -> 14 ms for 80 docs of up to 150 steps, 33 tags;
    bench/bench_kernels.py; tests/layers/test_crf.py checks it against log space). The
    elementwise exp and log over whole arrays stay in torch (vectorised, on the input's device).
    """
    n_docs, n_steps, n_tags = emit.shape
    device = emit.device
    # shape: (batch,), each doc's last real step
    last = (mask.sum(dim=1) - 1).clamp(min=0).cpu().numpy()
    trans_max, start_max, end_max = transitions.max(), start.max(), end.max()
    exp_transitions = torch.exp(transitions - trans_max).cpu().numpy()
    # shape: (batch, length), each token's best emission; probs: its tags' at most 1
    emit_max = emit.max(dim=2).values
    # shape: (length, batch, n_tags)
    probs = torch.exp(emit - emit_max.unsqueeze(2)).transpose(0, 1).contiguous().cpu().numpy()
    start_probs, end_probs = (torch.exp(t - t.max()).cpu().numpy() for t in (start, end))
    with numpy.errstate(all="ignore"):  # underflow: caught below, then log space
        alpha, totals, beta, beta_totals, reverse = _scaled_passes(probs, last, exp_transitions, start_probs, end_probs)
    docs, steps = numpy.arange(n_docs), numpy.arange(n_steps)
    # Batch-major from here, on the input's device. Padding repeats the last real step's alpha,
    # and takes reversed step 0 (the end transition) for beta: token t is reversed step last - t.
    real_steps, reverse = numpy.minimum(steps[None, :], last[:, None]), reverse.T
    alpha, beta = alpha[real_steps, docs[:, None]], beta[reverse, docs[:, None]]
    alpha, beta, totals, beta_totals, real_steps, reverse, last, steps = (
        torch.from_numpy(array).to(device)
        for array in (alpha, beta, totals.T, beta_totals.T, real_steps, reverse, last[:, None], steps[None, :])
    )
    alpha_scale = torch.cumsum(torch.log(totals) + emit_max, dim=1) + start_max + steps * trans_max
    alpha_scale = alpha_scale.gather(1, real_steps)
    log_z = (
        alpha_scale.gather(1, last)[:, 0]
        + end_max
        + torch.log((alpha.gather(1, last.unsqueeze(2).expand(-1, -1, n_tags))[:, 0] * torch.exp(end - end_max)).sum(dim=1))
    )
    beta_scale = torch.cumsum(torch.log(beta_totals), dim=1) + end_max
    beta_scale[:, 1:] += torch.cumsum(emit_max.gather(1, reverse)[:, :-1] + trans_max, dim=1)
    beta_scale = beta_scale.gather(1, reverse)
    if not (torch.isfinite(log_z).all() and not torch.isnan(alpha).any() and not torch.isnan(beta).any()):
        return None
    return torch.log(alpha) + alpha_scale.unsqueeze(2), torch.log(beta) + beta_scale.unsqueeze(2), log_z


def _scaled_passes(probs, last, exp_transitions, start_probs, end_probs):
    """_scaled_forward_backward's two step loops in numpy over time-major (length, batch, n_tags)
    probabilities; returns the normalised alpha and beta (beta over each doc reversed), their
    factors per step, and the (length, batch) index of reversed step k: token last - k.

    The docs go through in chunks of ONE_THREAD_PRODUCT // n_tags**2: OpenBLAS runs a larger
    product on its own threads, which would spin against torch's (see layers._blas)."""
    n_steps, n_docs, n_tags = probs.shape
    reverse = numpy.maximum(last[None, :] - numpy.arange(n_steps)[:, None], 0)
    reversed_probs = probs[reverse, numpy.arange(n_docs)[None, :]]
    exp_transitions_t = numpy.ascontiguousarray(exp_transitions.T)
    alpha, totals = numpy.empty_like(probs), numpy.empty((n_steps, n_docs))
    beta, beta_totals = numpy.empty_like(probs), numpy.empty((n_steps, n_docs))
    beta[0] = end_probs / end_probs.sum()
    beta_totals[0] = end_probs.sum()
    chunk = max(1, ONE_THREAD_PRODUCT // (n_tags * n_tags))
    for docs in (slice(start, start + chunk) for start in range(0, n_docs, chunk)):
        _forward_steps(probs[:, docs], exp_transitions, start_probs, alpha[:, docs], totals[:, docs])
        _backward_steps(reversed_probs[:, docs], exp_transitions_t, beta[:, docs], beta_totals[:, docs])
    return alpha, totals, beta, beta_totals, reverse


def _forward_steps(probs, exp_transitions, start_probs, alpha, totals) -> None:
    """The scaled forward pass, in place: rows normalised to sum 1, totals[t] the factor taken out at step t."""
    numpy.multiply(start_probs, probs[0], out=alpha[0])
    _normalise(alpha[0], totals[0])
    for t in range(1, len(probs)):
        numpy.matmul(alpha[t - 1], exp_transitions, out=alpha[t])
        alpha[t] *= probs[t]
        _normalise(alpha[t], totals[t])


def _backward_steps(reversed_probs, exp_transitions_t, beta, totals) -> None:
    """The scaled backward pass over reversed docs, in place, from beta[0] (set by the caller)."""
    weighted = numpy.empty_like(beta[0])
    for k in range(1, len(reversed_probs)):
        numpy.multiply(reversed_probs[k - 1], beta[k - 1], out=weighted)
        numpy.matmul(weighted, exp_transitions_t, out=beta[k])
        _normalise(beta[k], totals[k])


def _normalise(rows: numpy.ndarray, totals: numpy.ndarray) -> None:
    """Divide each row by its sum, in place, and write the sums to totals."""
    rows.sum(axis=1, out=totals)
    rows /= totals[:, None]


def _log_forward_backward(emit, mask, transitions, start, end):
    """_forward_backward in log space (slower, never underflows)."""
    n_docs, n_steps, _ = emit.shape
    alpha = torch.empty_like(emit)
    beta = torch.empty_like(emit)
    alpha[:, 0] = start + emit[:, 0]
    for t in range(1, n_steps):
        stepped = torch.logsumexp(alpha[:, t - 1].unsqueeze(2) + transitions, dim=1) + emit[:, t]
        alpha[:, t] = torch.where(mask[:, t].unsqueeze(1), stepped, alpha[:, t - 1])
    beta[:, n_steps - 1] = end
    for t in range(n_steps - 2, -1, -1):
        stepped = torch.logsumexp(transitions + (emit[:, t + 1] + beta[:, t + 1]).unsqueeze(1), dim=2)
        beta[:, t] = torch.where(mask[:, t + 1].unsqueeze(1), stepped, end)
    return alpha, beta, torch.logsumexp(alpha[:, n_steps - 1] + end, dim=1)
