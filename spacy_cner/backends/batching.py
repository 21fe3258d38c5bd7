"""The one batcher by token budget: which items (docs, windows) go to one model or CRF call.

thinc's `minibatch_by_words` batches training examples and spaCy's `minibatch` counts items; here
the budget also counts padding (a padded call costs its longest item times its size), items can be
taken in order or grouped by length, and the indices come back, so a caller scatters results back
to its own docs.
"""

from typing import List, Optional, Sequence

import numpy


def batches_by_budget(
    lengths: Sequence[int],
    max_tokens: Optional[int] = None,
    *,
    max_items: Optional[int] = None,
    by_length: bool = False,
    padded: bool = False,
    skip_empty: bool = False,
) -> List[List[int]]:
    """Indices of items in batches of at most max_tokens tokens and max_items items (or one item).

    lengths (Sequence[int]): Each item's tokens.
    max_tokens (Optional[int]): The token budget of a batch; None: no budget.
    max_items (Optional[int]): The most items in a batch; None: no limit.
    by_length (bool): Take the items shortest first (ties in order), so that items of similar
        length share a batch; else in their order.
    padded (bool): Count a batch as its longest item times its size (what a padded call costs);
        else as the sum of its lengths.
    skip_empty (bool): Leave out items of length 0.
    RETURNS (List[List[int]]): The batches, each a list of indices into lengths.
    """
    order = [i for i in range(len(lengths)) if lengths[i] or not skip_empty]
    if by_length:
        order.sort(key=lambda i: lengths[i])
    batches: List[List[int]] = []
    tokens = longest = 0
    for i in order:
        if batches and (max_items is None or len(batches[-1]) < max_items):
            grown_longest = max(longest, lengths[i])
            grown = grown_longest * (len(batches[-1]) + 1) if padded else tokens + lengths[i]
            if max_tokens is None or grown <= max_tokens:
                batches[-1].append(i)
                tokens, longest = grown, grown_longest
                continue
        batches.append([i])
        tokens = longest = lengths[i]
    return batches


def padded_buckets(lengths: Sequence[int], max_items: Optional[int] = None, call_cost: float = 0.0) -> List[List[int]]:
    """Indices of items in the padded calls that cost least in all: the items sorted by length (ties in
    order), cut into runs of at most max_items, a call costing call_cost plus its longest item times its
    size (the positions a padded call computes). Exact over the cuts, by dynamic programming.

    Why not batches_by_budget(padded=True): a budget bounds each call, not the padding: a run of short
    items padded to one long one stays under it. Here a long item goes to a call of its own where the
    padding it would bring costs more than a call (a tiny encoder on a CPU: 64 positions; a large one
    on a GPU, its kernels launched once per call: thousands).

    lengths (Sequence[int]): Each item's positions.
    max_items (Optional[int]): The most items in a call; None: no limit.
    call_cost (float): The cost of a call beside its positions, in positions.
    RETURNS (List[List[int]]): The calls, shortest items first, each a list of indices into lengths.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n = len(order)
    if not n:
        return []
    size = n if max_items is None else max(1, max_items)
    ordered = numpy.asarray([lengths[i] for i in order], dtype="float64")
    # cost[j]: the least cost of the first j items; start[j]: where the last call of that best cut starts
    cost = numpy.zeros((n + 1,), dtype="float64")
    start = numpy.zeros((n + 1,), dtype="int64")
    for j in range(1, n + 1):
        first = max(0, j - size)
        # a call over items first..j-1, each padded to item j-1 (the longest)
        candidates = cost[first:j] + ordered[j - 1] * (j - numpy.arange(first, j))
        best = int(numpy.argmin(candidates))
        cost[j] = candidates[best] + call_cost
        start[j] = first + best
    calls = []
    end = n
    while end > 0:
        calls.append(order[start[end] : end])
        end = int(start[end])
    return calls[::-1]
