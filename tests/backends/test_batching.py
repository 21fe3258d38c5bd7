from hypothesis import given
from hypothesis import strategies as st

from spacy_cner.backends.batching import batches_by_budget

LENGTHS = st.lists(st.integers(0, 50), max_size=30)


def _flat(batches):
    return [i for batch in batches for i in batch]


@given(lengths=LENGTHS, max_tokens=st.integers(1, 200))
def test_in_order_batches_keep_the_order_and_the_sum_budget(lengths, max_tokens):
    batches = batches_by_budget(lengths, max_tokens)
    assert _flat(batches) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or sum(lengths[i] for i in batch) <= max_tokens
    # Greedy: the next item would have broken the budget of the batch before it.
    for before, after in zip(batches, batches[1:]):
        assert sum(lengths[i] for i in before) + lengths[after[0]] > max_tokens


@given(lengths=LENGTHS, max_tokens=st.integers(1, 200))
def test_padded_length_groups_bound_the_padding(lengths, max_tokens):
    batches = batches_by_budget(lengths, max_tokens, by_length=True, padded=True, skip_empty=True)
    assert sorted(_flat(batches)) == [i for i, n in enumerate(lengths) if n]
    assert [lengths[i] for i in _flat(batches)] == sorted(n for n in lengths if n)
    for batch in batches:
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= max_tokens


@given(lengths=LENGTHS, max_items=st.integers(1, 8))
def test_item_limit_without_a_token_budget(lengths, max_items):
    batches = batches_by_budget(lengths, max_items=max_items, by_length=True)
    assert [len(batch) for batch in batches[:-1]] == [max_items] * (len(batches) - 1)
    assert sorted(_flat(batches)) == list(range(len(lengths)))
    assert [lengths[i] for i in _flat(batches)] == sorted(lengths)


def test_no_limits_is_one_batch_and_no_items_none():
    assert batches_by_budget([3, 0, 9]) == [[0, 1, 2]]
    assert batches_by_budget([]) == []
    # An item over the budget goes alone; empty items can be left out.
    assert batches_by_budget([5, 50, 5], 10) == [[0], [1], [2]]
    assert batches_by_budget([0, 2, 0], 10, skip_empty=True) == [[1]]
