"""The forward-backward algorithm of a linear-chain CRF: alpha, beta and log Z per doc, scaled in
probability space with log space as the fallback, and expected transition counts."""

from typing import NamedTuple, Optional

import numpy
import torch

# Multiply-adds of the largest matrix product the CRF's forward-backward makes at once: OpenBLAS
# (numpy's) splits a product of more than 4 x 65,536 over its threads (interface/gemm.c).
ONE_THREAD_PRODUCT = 4 * 65536


def forward_backward(emit, mask, transitions, start, end):
    """alpha[b, t, j]: log-sum of the paths over 0..t ending in j (emission t included); beta[b,
    t, j]: of the continuations after t from j (end transition included); log Z per doc.
    alpha at padding repeats the last real step's; beta there is the end transition.

    Computed in probability space, each step one matrix product with the row sums moved
    into a log scale (the scaled forward-backward of Rabiner 1989; several times faster on CPUs
    than log-sum-exp over (batch, n_tags, n_tags)); forbidden entries come out as -inf. A batch
    whose scaled sums underflow (only with extreme scores) is redone in log space."""
    scaled = scaled_forward_backward(emit, mask, transitions, start, end)
    if scaled is not None:
        return scaled
    return log_forward_backward(emit, mask, transitions, start, end)


def pair_expectations(
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


def transition_expectations(
    alpha: torch.Tensor,
    beta: torch.Tensor,
    emissions: torch.Tensor,
    log_z: torch.Tensor,
    mask: torch.Tensor,
    transitions: torch.Tensor,
    weight: torch.Tensor,
) -> torch.Tensor:
    """sum_b weight[b] * E_b[the number of times tag i is followed by tag j], shape (n_tags, n_tags): the
    gradient of sum_b weight[b] * log Z_b with respect to the transition scores, from forward_backward's
    alpha, beta and log Z of these emissions (batch, length, n_tags), mask (batch, length) and weights
    (batch,). Each pair (t - 1, t) within a doc contributes exp(alpha[t - 1, i] + transitions[i, j] +
    emissions[t, j] + beta[t, j] - log Z)."""
    pairs = mask[:, 1:]
    return pair_expectations(
        alpha[:, :-1][pairs],
        (emissions[:, 1:] + beta[:, 1:] - log_z[:, None, None])[pairs],
        transitions,
        weight.unsqueeze(1).expand(-1, pairs.shape[1])[pairs],
    )


class ScaledLattice(NamedTuple):
    """Forward-backward in scaled form: alpha and beta rows that sum to 1 and the log of what they were
    divided by, log alpha[b, t, j] = log(alpha[b, t, j]) + alpha_scale[b, t] (beta likewise), and log Z.
    Marginals, P(y_t = j) = alpha * beta / sum_j(alpha * beta), need no log or exp at all."""

    alpha: torch.Tensor  # shape: (batch, length, n_tags)
    alpha_scale: torch.Tensor  # shape: (batch, length)
    beta: torch.Tensor  # shape: (batch, length, n_tags)
    beta_scale: torch.Tensor  # shape: (batch, length)
    log_z: torch.Tensor  # shape: (batch,)


def scaled_forward_backward(emit, mask, transitions, start, end):
    """forward_backward in probability space (scaled_lattice), as log alpha, log beta and log Z; None
    where the scaled sums underflow."""
    lattice = scaled_lattice(emit, mask, transitions, start, end)
    if lattice is None:
        return None
    alpha, alpha_scale, beta, beta_scale, log_z = lattice
    return torch.log(alpha) + alpha_scale.unsqueeze(2), torch.log(beta) + beta_scale.unsqueeze(2), log_z


def scaled_lattice(emit, mask, transitions, start, end) -> Optional[ScaledLattice]:
    """The scaled passes (ScaledLattice, on the input's device), or None where they underflow.

    They run every doc of the batch over all steps, without masks (the fewest
    array operations per step: a step's cost is mostly their overhead); a doc's steps after its
    end compute garbage that is never read. The backward pass runs over each doc reversed, so
    that every doc starts it at step 0. Then each doc's real steps are gathered, the padding
    taking the values of log_forward_backward.

    The two step loops run in numpy on the CPU, time-major (each step's rows one contiguous
    block, written in place): a numpy operation on a (batch, n_tags) array costs a fraction of a
    torch one's dispatch, and a device would launch a kernel per operation (BENCHMARKS.md#training;
    tests/layers/test_crf.py checks it against log space). The
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
        + torch.log(
            (alpha.gather(1, last.unsqueeze(2).expand(-1, -1, n_tags))[:, 0] * torch.exp(end - end_max)).sum(dim=1)
        )
    )
    beta_scale = torch.cumsum(torch.log(beta_totals), dim=1) + end_max
    beta_scale[:, 1:] += torch.cumsum(emit_max.gather(1, reverse)[:, :-1] + trans_max, dim=1)
    beta_scale = beta_scale.gather(1, reverse)
    if not (torch.isfinite(log_z).all() and not torch.isnan(alpha).any() and not torch.isnan(beta).any()):
        return None
    return ScaledLattice(alpha, alpha_scale, beta, beta_scale, log_z)


def _scaled_passes(probs, last, exp_transitions, start_probs, end_probs):
    """scaled_forward_backward's two step loops in numpy over time-major (length, batch, n_tags)
    probabilities; returns the normalised alpha and beta (beta over each doc reversed), their
    factors per step, and the (length, batch) index of reversed step k: token last - k.

    The docs go through in chunks of ONE_THREAD_PRODUCT // n_tags**2: OpenBLAS runs a larger
    product on its own threads, which would spin against torch's (see backends.rowwise_ops)."""
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


def log_forward_backward(emit, mask, transitions, start, end):
    """forward_backward in log space (slower, never underflows)."""
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
