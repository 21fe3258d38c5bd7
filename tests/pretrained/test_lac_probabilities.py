"""LAC's entity probabilities (lac_probabilities.py) against brute force over every tag sequence."""

import itertools

import numpy
import pytest

from spacy_cner.pretrained.lac_probabilities import EntityIds, entity_log_probs, entity_probabilities

# tag ids: a-B 0, a-I 1, PER-B 2, PER-I 3, O 4
N_TAGS = 5


def brute_force(emissions, crf_weights, entity):
    start, end, transitions = crf_weights[0], crf_weights[1], crf_weights[2:]
    emit = emissions[entity.piece]
    scores, hits = [], []
    for path in itertools.product(range(N_TAGS), repeat=len(emit)):
        score = start[path[0]] + end[path[-1]] + sum(emit[t, tag] for t, tag in enumerate(path))
        score += sum(transitions[a, b] for a, b in zip(path, path[1:]))
        first_ok = path[entity.first] == entity.begin_tag or (
            entity.open_start and path[entity.first] == entity.inside_tag
        )
        inside_ok = all(path[t] == entity.inside_tag for t in range(entity.first + 1, entity.last + 1))
        after = entity.last + 1
        end_ok = entity.open_end or after >= len(path) or path[after] != entity.inside_tag
        scores.append(score)
        hits.append(first_ok and inside_ok and end_ok)
    scores = numpy.asarray(scores)
    top = scores.max()
    return numpy.log(numpy.exp(scores[numpy.asarray(hits)] - top).sum()) - numpy.log(numpy.exp(scores - top).sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_entity_log_probs_match_brute_force(seed):
    rng = numpy.random.default_rng(seed)
    emissions = [rng.normal(0, 2, (length, N_TAGS)) for length in (4, 1, 5)]
    crf_weights = rng.normal(0, 1, (N_TAGS + 2, N_TAGS))
    entities = [
        EntityIds(piece, first, last, begin, begin + 1, open_start, open_end)
        for piece, (first, last) in ((0, (0, 0)), (0, (1, 3)), (0, (2, 2)), (1, (0, 0)), (2, (1, 3)), (2, (3, 4)))
        for begin in (0, 2)
        for open_start in (False, True)
        for open_end in (False, True)
    ]
    found = entity_log_probs(emissions, crf_weights, entities)
    expected = [brute_force(emissions, crf_weights, entity) for entity in entities]
    numpy.testing.assert_allclose(found, expected, rtol=1e-9, atol=1e-9)
    probabilities = entity_probabilities(emissions, crf_weights, entities)
    assert all(0.0 <= p <= 1.0 for p in probabilities)
    assert len(entity_log_probs(emissions, crf_weights, [])) == 0
