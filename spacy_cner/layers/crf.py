"""A linear-chain CRF (pytorch-crf) whose transitions obey the tag scheme."""

from typing import Callable, List, Optional, Sequence, Tuple

import numpy
import torch
from thinc.api import ArgsKwargs, Model, registry, torch2xp, xp2torch
from thinc.shims.shim import Shim
from thinc.types import Floats1d, Floats2d, Ints1d
from torch.nn.utils import parametrize
from torchcrf import CRF as TorchCRF

from ..backends.batching import batches_by_budget
from ..backends.viterbi import viterbi_paths
from ..tags import allowed_transitions
from ._torch import RebuildableModule, pad_batch, set_torch_module, torch_module, wrap_rebuildable
from ..backends.forward_backward import forward_backward, transition_expectations

# Per-doc (length, n_tags) masks: 1 where a tag is allowed at a token.
AllowedTags = Floats2d
CRFInput = Tuple[List[Floats2d], List[AllowedTags]]
# Padded positions (batch x longest) per Viterbi call: docs of similar length decode
# together, so that one long doc does not pad a whole batch to its length.
DECODE_BATCH_TOKENS = 65536
# The score of a forbidden transition or tag: low enough that no path using
# one can win, finite so that log-sum-exp stays free of NaN.
FORBIDDEN = -1e9


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
    *,
    on_host: bool = False,
) -> List[Ints1d]:
    """The best tag-id sequence per doc, by Viterbi, within the allowed tags.

    model (Model): A CRF layer.
    emissions (List[Floats2d]): Emission scores (length, n_tags) per doc.
    allowed (Optional[List[Floats2d]]): Optional per-token tag masks, e.g. for
        entities set by an earlier component.
    on_host (bool): Return numpy arrays, as the decoding computes them on the host, rather than
        arrays of the model's ops (on a GPU: one copy to the device per doc, and back to read them).
    RETURNS (List[Ints1d]): The decoded tag ids; empty docs give empty arrays.
    """
    as_ids = (lambda path: path.astype("int32")) if on_host else model.ops.asarray1i
    paths = [as_ids(numpy.zeros((0,), dtype="int32")) for _ in emissions]
    crf = torch_module(model)
    device = crf.device
    lengths = [len(scores) for scores in emissions]
    for group in batches_by_budget(lengths, DECODE_BATCH_TOKENS, by_length=True, padded=True, skip_empty=True):
        scores, mask = pad_batch(model, [emissions[i] for i in group], requires_grad=False, device=device)
        if allowed is not None:
            allowed_mask, _ = pad_batch(model, [allowed[i] for i in group], requires_grad=False, device=device)
            scores = scores.masked_fill(allowed_mask == 0, FORBIDDEN)
        with torch.no_grad():
            decoded = crf.viterbi(scores, mask)
        for i, path in zip(group, decoded):
            paths[i] = as_ids(path)
    return paths


class ConstrainedCRF(TorchCRF, RebuildableModule):
    """pytorch-crf's CRF with scheme-forbidden transitions masked out.

    Only pytorch-crf's parameters are used (start_transitions, transitions, end_transitions, and their
    initialisation): the masks are applied through torch parametrizations, so every read of them gives the
    constrained scores, and the routines that read them are this package's (forward: the allowed paths'
    log-likelihood, _AllowedPathsLogLikelihood; viterbi: backends/viterbi.py), not pytorch-crf's own
    forward or decode.
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
        """The best path per sequence, shapes as in forward: backends.viterbi's decoding (pytorch-crf's
        _viterbi_decode computes every padded position, and keeps back-pointers that cost more than
        the scores on CPU)."""
        lengths = mask.sum(dim=1).cpu().numpy()
        with parametrize.cached():
            return viterbi_paths(emissions, lengths, self.start_transitions, self.transitions, self.end_transitions)


class _AllowedPathsLogLikelihood(torch.autograd.Function):
    """log P(allowed paths | doc) per doc = log Z(allowed) - log Z(all), with its gradient read off
    the marginals of one forward-backward pass (float64) over both.

    Why not autograd through the forward algorithm (as pytorch-crf): its backward replays each
    step's small tensor operations, and on CPU those cost more than the arithmetic: the loss took
    a quarter of a training step of the default config. The gradient of log Z is the expectation
    of the score's parts (Sutton and McCallum 2012, eq. 1.33): d log Z / d emission[t, j] =
    P(y_t = j), d log Z / d transition[i, j] = sum_t P(y_t-1 = i, y_t = j), and the start and
    end transitions' the first and last tags' marginals, under Z over all paths or over the
    allowed ones. forward_backward gives alpha, beta and log Z (log space where the scaled sums
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
        alpha, beta, log_z = forward_backward(both, both_mask, *scores)
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
        d_transitions = transition_expectations(alpha, beta, both, log_z, mask, transitions, weight)
        return (
            d_emissions.to(emissions_dtype),
            None,
            None,
            d_start.to(start_dtype),
            d_transitions.to(transitions_dtype),
            d_end.to(end_dtype),
        )


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
