"""The one batcher by token budget: which items (docs, windows) go to one model or CRF call.

thinc's `minibatch_by_words` batches training examples and spaCy's `minibatch` counts items; here
the budget also counts padding (a padded call costs its longest item times its size), items can be
taken in order or grouped by length, and the indices come back, so a caller scatters results back
to its own docs.
"""

from typing import List, Optional, Sequence


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
