"""Reference implementations the tests check the package against: clear, slow, brute force.

The CRF oracle enumerates every tag sequence: log-sums of path scores give log Z, the
likelihood of the gold-consistent paths and span marginals; the best path is Viterbi's answer.
"""

import itertools
from typing import Iterable, Iterator, Optional, Sequence, Tuple

import numpy

from spacy_cner.tags import is_valid_sequence

# (start, transitions, end) scores of a linear-chain CRF, float64
CRFScores = Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]


def logsumexp(values: Iterable[float]) -> float:
    values = numpy.asarray(list(values), dtype="float64")
    top = values.max()
    return float(top + numpy.log(numpy.exp(values - top).sum()))


def path_score(scores: CRFScores, emissions: numpy.ndarray, path: Sequence[int]) -> float:
    """The unnormalised log score of one tag path."""
    start, transitions, end = scores
    score = start[path[0]] + end[path[-1]]
    score += sum(float(emissions[t, tag]) for t, tag in enumerate(path))
    score += sum(transitions[a, b] for a, b in zip(path[:-1], path[1:]))
    return float(score)


def all_paths(n_tags: int, length: int) -> Iterator[Tuple[int, ...]]:
    """Every tag sequence, valid or not."""
    return itertools.product(range(n_tags), repeat=length)


def valid_paths(
    tag_names: Sequence[str], length: int, allowed: Optional[numpy.ndarray] = None
) -> Iterator[Tuple[int, ...]]:
    """The tag sequences the scheme allows, within `allowed` (length, n_tags) when given."""
    for path in all_paths(len(tag_names), length):
        if not is_valid_sequence(path, tag_names):
            continue
        if allowed is not None and not all(allowed[t, tag] for t, tag in enumerate(path)):
            continue
        yield path


def log_sum_paths(scores: CRFScores, emissions: numpy.ndarray, paths: Iterable[Sequence[int]]) -> float:
    """log of the summed exp-scores of the given paths."""
    return logsumexp(path_score(scores, emissions, path) for path in paths)
