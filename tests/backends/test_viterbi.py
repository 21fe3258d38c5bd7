import itertools

import numpy
import pytest
import torch

from spacy_cner.backends import viterbi
from spacy_cner.backends.viterbi import viterbi_paths


@pytest.fixture(params=["numpy", "torch"])
def forward_pass(request, monkeypatch):
    """Each test below runs both forward passes: numpy's for small steps (every batch here is one), and
    torch's, the one above viterbi.SMALL_STEP."""
    if request.param == "torch":
        monkeypatch.setattr(viterbi, "SMALL_STEP", -1)
    else:
        monkeypatch.setattr(viterbi, "SMALL_STEP", 10**9)
    return request.param


def path_score(emissions, start, transitions, end, path):
    score = start[path[0]] + emissions[0, path[0]] + end[path[-1]]
    for i in range(1, len(path)):
        score += transitions[path[i - 1], path[i]] + emissions[i, path[i]]
    return score


def back_pointer_paths(emissions, lengths, start, transitions, end):
    """The textbook decoder, one sequence at a time: back-pointers from torch's max with indices
    (the first best on ties), as pytorch-crf's _viterbi_decode."""
    paths = []
    for row, length in enumerate(lengths):
        if length == 0:
            paths.append([])
            continue
        score = start + emissions[row, 0]
        pointers = []
        for i in range(1, length):
            best, previous = (score.unsqueeze(1) + transitions).max(dim=0)
            score = best + emissions[row, i]
            pointers.append(previous)
        tag = int((score + end).argmax())
        path = [tag]
        for previous in reversed(pointers):
            tag = int(previous[tag])
            path.append(tag)
        paths.append(path[::-1])
    return paths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_viterbi_paths_are_the_best_paths(seed, forward_pass):
    """Against every path of small random sequences, lengths mixed and in no order."""
    rng = numpy.random.default_rng(seed)
    n_tags = 3
    lengths = numpy.array([3, 1, 4, 2, 4])
    emissions = torch.from_numpy(rng.normal(0, 2, (len(lengths), 4, n_tags)).astype("float32"))
    start, end = (torch.from_numpy(rng.normal(0, 2, n_tags).astype("float32")) for _ in range(2))
    transitions = torch.from_numpy(rng.normal(0, 2, (n_tags, n_tags)).astype("float32"))
    decoded = viterbi_paths(emissions, lengths, start, transitions, end)
    assert [len(path) for path in decoded] == lengths.tolist()
    for row, (path, length) in enumerate(zip(decoded, lengths)):
        scores = {
            candidate: float(path_score(emissions[row], start, transitions, end, candidate))
            for candidate in itertools.product(range(n_tags), repeat=int(length))
        }
        assert tuple(path.tolist()) == max(scores, key=scores.get)


def test_viterbi_paths_break_ties_as_back_pointers(forward_pass):
    """Small integer scores make many paths tie: the path is the back-pointers' (first best), as
    paddle's crf_decoding and pytorch-crf choose."""
    rng = numpy.random.default_rng(3)
    n_tags = 5
    lengths = numpy.array([6, 2, 9, 0, 9, 1])
    emissions = torch.from_numpy(rng.integers(-1, 2, (len(lengths), 9, n_tags)).astype("float32"))
    start, end = (torch.from_numpy(rng.integers(-1, 2, n_tags).astype("float32")) for _ in range(2))
    transitions = torch.from_numpy(rng.integers(-1, 2, (n_tags, n_tags)).astype("float32"))
    transitions[0, 1] = -1e9  # a forbidden transition, as the constrained CRF's
    decoded = viterbi_paths(emissions, lengths, start, transitions, end)
    expected = back_pointer_paths(emissions, lengths.tolist(), start, transitions, end)
    assert [path.tolist() for path in decoded] == expected


def test_viterbi_paths_of_empty_sequences(forward_pass):
    emissions = torch.zeros((2, 3, 4))
    start = end = torch.zeros(4)
    paths = viterbi_paths(emissions, numpy.array([0, 0]), start, torch.zeros((4, 4)), end)
    assert [path.tolist() for path in paths] == [[], []]
    assert viterbi_paths(torch.zeros((0, 0, 4)), numpy.zeros(0, dtype=int), start, torch.zeros((4, 4)), end) == []


def test_viterbi_paths_of_trained_parameters(forward_pass):
    """Weights that require gradients (a CRF's parameters) decode without tracking them."""
    transitions = torch.nn.Parameter(torch.randn(3, 3))
    paths = viterbi_paths(torch.randn(1, 4, 3), numpy.array([4]), torch.zeros(3), transitions, torch.zeros(3))
    assert len(paths[0]) == 4


@pytest.mark.parametrize("n_seqs,n_tags", [(1, 33), (1, 57), (3, 9), (64, 33)])
def test_the_two_forward_passes_give_the_same_paths(n_seqs, n_tags, monkeypatch):
    """The numpy and torch forward passes are the same float operations: the same paths, ties included
    (integer scores), on either side of SMALL_STEP's sizes, lengths mixed."""
    rng = numpy.random.default_rng(n_seqs * n_tags)
    for scores in ("normal", "integers"):
        draw = (lambda size: rng.normal(0, 2, size)) if scores == "normal" else (lambda size: rng.integers(-1, 2, size))
        lengths = rng.integers(0, 40, n_seqs)
        lengths[0] = 40
        emissions = torch.from_numpy(draw((n_seqs, 40, n_tags)).astype("float32"))
        start, end = (torch.from_numpy(draw(n_tags).astype("float32")) for _ in range(2))
        transitions = torch.from_numpy(draw((n_tags, n_tags)).astype("float32"))
        decoded = {}
        for name, small_step in (("numpy", 10**9), ("torch", -1)):
            monkeypatch.setattr(viterbi, "SMALL_STEP", small_step)
            decoded[name] = [path.tolist() for path in viterbi_paths(emissions, lengths, start, transitions, end)]
        assert decoded["numpy"] == decoded["torch"]
        if scores == "integers":
            expected = back_pointer_paths(emissions, lengths.tolist(), start, transitions, end)
            assert decoded["numpy"] == expected
