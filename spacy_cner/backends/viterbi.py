"""Viterbi decoding of a linear-chain CRF over a padded batch, fast on CPU: the one decoder of the
package's CRF (layers/crf.py) and of LAC's tagger (pretrained/lac_net.py).

Why not pytorch-crf's _viterbi_decode (or a loop of `max(dim=1)` keeping the back-pointers): on CPU,
torch's max with indices over the previous tag costs about ten times its max without them (1.4 ms
against 0.12 ms for 256 sequences of 33 tags on an AMD EPYC, one thread; argmax over that dimension
costs more again), and with many tags that reduction is most of the decoding. So the forward pass keeps
only the best scores (`amax`), and the backtrace recomputes each step's best previous tag for the one
tag the path continues from: (batch, tags) values per step instead of (batch, tags, tags). The sums
recomputed are the same float operations on the same numbers, so the path is the one the back-pointers
give, ties included (numpy's argmax, as torch's max, takes the first best).
"""

from typing import List

import numpy
import torch

# A step of at most this many (sequence, tag, previous tag) sums runs in numpy: below it a torch
# operation's dispatch (five of them a step) costs more than the sums, so one text at a time
# (nlp(text)) decodes faster; above it torch's vectorised max wins. Where the two cross is measured in
# BENCHMARKS.md#inference.
SMALL_STEP = 4096


@torch.no_grad()
def viterbi_paths(
    emissions: torch.Tensor,
    lengths: numpy.ndarray,
    start: torch.Tensor,
    transitions: torch.Tensor,
    end: torch.Tensor,
) -> List[numpy.ndarray]:
    """The best tag path of each sequence of a padded batch.

    Each step computes only the sequences still running (the sequences sorted longest first, step i
    updates the first k_i rows, as torch's packed sequences do), so a batch costs its real length x
    tags^2, not its longest length x batch size x tags^2; the emission is added after the max over the
    previous tag (it does not depend on it).

    emissions (torch.Tensor): Scores, shape (batch, length, tags); positions past a sequence's end are
        ignored.
    lengths (numpy.ndarray): The real length of each sequence, shape (batch,); 0 gives an empty path.
    start (torch.Tensor): The score of starting in each tag, shape (tags,).
    transitions (torch.Tensor): The score of moving from tag i (row) to tag j (column), (tags, tags).
    end (torch.Tensor): The score of ending in each tag, shape (tags,).
    RETURNS (List[numpy.ndarray]): The tag ids (int64) of each sequence, in the batch's order.
    """
    n_seqs, n_steps, n_tags = emissions.shape
    lengths = numpy.asarray(lengths, dtype=numpy.int64)
    if n_seqs == 0:
        return []
    n_steps = min(n_steps, int(lengths.max()))
    if n_steps == 0:
        return [numpy.zeros(0, dtype=numpy.int64) for _ in range(n_seqs)]
    # Longest first, so that the sequences running at step i are the first n_running[i].
    order = numpy.argsort(-lengths, kind="stable")
    lengths = lengths[order]
    n_running = (lengths[None, :] > numpy.arange(n_steps)[:, None]).sum(axis=1).tolist()
    # Time first: each step reads contiguous rows.
    steps = emissions[torch.as_tensor(order, device=emissions.device), :n_steps].transpose(0, 1).contiguous()
    # shape: (length, batch, tags): the best score of a path ending in each tag at each step (a sequence's rows
    # past its end stay 0 and are never read)
    if steps.device.type == "cpu" and n_seqs * n_tags * n_tags <= SMALL_STEP:
        history_np = _numpy_forward(steps.numpy(), start.detach().numpy(), transitions.detach().numpy(), n_running)
    else:
        first = start + steps[0]
        history = first.new_zeros((n_steps, n_seqs, n_tags))
        history[0] = first
        for i in range(1, n_steps):
            k = n_running[i]
            history[i, :k] = (history[i - 1, :k].unsqueeze(2) + transitions).amax(dim=1) + steps[i, :k]
        history_np = history.cpu().numpy()
    rows = numpy.arange(n_seqs)
    last = numpy.maximum(lengths - 1, 0)
    last_scores = history_np[last, rows] + end.detach().cpu().numpy()
    # Row j: the scores of moving into tag j from each tag.
    into = transitions.detach().t().contiguous().cpu().numpy()
    tags = numpy.zeros((n_seqs, n_steps), dtype=numpy.int64)
    current = last_scores.argmax(axis=1)
    tags[rows, last] = current
    for i in range(n_steps - 1, 0, -1):
        k = n_running[i]
        current[:k] = (history_np[i - 1, :k] + into[current[:k]]).argmax(axis=1)
        tags[:k, i - 1] = current[:k]
    row_of = numpy.empty_like(order)
    row_of[order] = rows
    return [tags[row, : lengths[row]] for row in row_of]


def _numpy_forward(steps, start, transitions, n_running) -> numpy.ndarray:
    """viterbi_paths' forward pass in numpy, for small steps: the same float operations in the same
    order as the torch loop (start + first step, then per step the sum, its max over the previous tag,
    plus the emission), so the same scores bit for bit; each step written in place."""
    n_steps, n_seqs, n_tags = steps.shape
    first = start + steps[0]
    history = numpy.zeros((n_steps, n_seqs, n_tags), dtype=numpy.result_type(first, transitions, steps))
    history[0] = first
    sums = numpy.empty((n_seqs, n_tags, n_tags), dtype=history.dtype)
    for i in range(1, n_steps):
        k = n_running[i]
        numpy.add(history[i - 1, :k, :, None], transitions, out=sums[:k])
        sums[:k].max(axis=1, out=history[i, :k])
        history[i, :k] += steps[i, :k]
    return history
