"""Sliding-window attention (cs): which keys a query may attend to, for numpy arrays and torch tensors."""

import numpy
import pytest
import torch

from spacy_cner.layers.attention_window import allowed_keys, check_window


def brute_force(positions, query_mask, window):
    batch, length = positions.shape
    allowed = numpy.zeros((batch, length, length), dtype=bool)
    for b in range(batch):
        for t in range(length):
            for j in range(length):
                allowed[b, t, j] = (not query_mask[b, t]) or abs(positions[b, t] - positions[b, j]) <= window
    return allowed


@pytest.mark.parametrize("window", [0, 1, 3])
def test_allowed_keys_matches_brute_force(window):
    rng = numpy.random.default_rng(window)
    # Repeated positions: a token's wordpieces share its position.
    positions = numpy.sort(rng.integers(0, 6, size=(3, 9)), axis=1).astype("float32")
    query_mask = numpy.arange(9)[None, :] < numpy.asarray([[9], [5], [0]])
    expected = brute_force(positions, query_mask, window)
    numpy.testing.assert_array_equal(allowed_keys(positions, query_mask, window), expected)
    found = allowed_keys(torch.tensor(positions), torch.tensor(query_mask), window)
    assert found.dtype == torch.bool
    numpy.testing.assert_array_equal(found.numpy(), expected)


def test_check_window():
    check_window(None, "X")
    check_window(0, "X")
    with pytest.raises(ValueError, match="X attention_window must be >= 0 or null, got -1"):
        check_window(-1, "X")
