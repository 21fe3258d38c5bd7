import itertools

from hypothesis import given
from hypothesis import strategies as st

from spacy_cner.backends.batching import batches_by_budget, padded_buckets

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


def _call_costs(lengths, calls, call_cost):
    return sum(call_cost + max(lengths[i] for i in call) * len(call) for call in calls)


@given(lengths=st.lists(st.integers(0, 60), max_size=9), max_items=st.integers(1, 5), call_cost=st.integers(0, 100))
def test_padded_buckets_are_the_cheapest_cut_of_the_sorted_items(lengths, max_items, call_cost):
    """Against every cut of the items sorted by length into runs of at most max_items."""
    calls = padded_buckets(lengths, max_items, call_cost)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    assert _flat(calls) == order
    assert all(1 <= len(call) <= max_items for call in calls)
    best = None
    for cuts in itertools.product([False, True], repeat=max(len(order) - 1, 0)):
        runs, run = [], [order[0]] if order else []
        for cut, i in zip(cuts, order[1:]):
            if cut:
                runs.append(run)
                run = []
            run.append(i)
        runs += [run] if run else []
        if all(len(r) <= max_items for r in runs):
            cost = _call_costs(lengths, runs, call_cost)
            best = cost if best is None else min(best, cost)
    assert _call_costs(lengths, calls, call_cost) == (best or 0)


def test_padded_buckets_put_a_long_item_alone_where_its_padding_costs_more_than_a_call():
    assert padded_buckets([5, 100, 6, 5], call_cost=64) == [[0, 3, 2], [1]]
    assert padded_buckets([5, 100, 6, 5], call_cost=1000) == [[0, 3, 2, 1]]
    assert padded_buckets([5, 5, 5], max_items=2, call_cost=1000) == [[0], [1, 2]]
    assert padded_buckets([]) == []
