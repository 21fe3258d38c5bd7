"""The constrained CRF: log-likelihood and Viterbi against brute force over all tag sequences."""

import itertools
import random

import numpy
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import reference
from reference import logsumexp, valid_paths
from spacy_cner.backends.batching import padded_buckets
from spacy_cner.layers import crf_posteriors
from spacy_cner.backends import forward_backward as fb_module
from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.crf import CRF, FORBIDDEN, ConstrainedCRF, crf_decode
from spacy_cner.layers.crf_posteriors import entity_probabilities, span_log_probs
from spacy_cner.tags import allowed_transitions, get_tag_names, is_valid_sequence, spans_to_tags, tags_to_spans

TAG_SETS = {
    "BIOES-1": get_tag_names(["X"], "BIOES"),  # 5 tags
    "BIO-2": get_tag_names(["X", "Y"], "BIO"),  # 5 tags
    "BIO-1": get_tag_names(["X"], "BIO"),  # 3 tags
}
LENGTHS = [1, 2, 3, 4]


def make_crf(tag_names, seed=0):
    """An initialized CRF layer whose raw scores (forbidden entries included) are random."""
    model = CRF()
    model.initialize(Y=tag_names)
    crf = torch_module(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ("start_transitions", "transitions", "end_transitions"):
            original = crf.parametrizations[name].original
            original.copy_(torch.randn(original.shape, generator=generator))
    return model


def raw_scores(model):
    """The CRF's start, transition and end scores as float64 numpy arrays."""
    crf = torch_module(model)
    return tuple(
        crf.parametrizations[name].original.detach().double().numpy()
        for name in ("start_transitions", "transitions", "end_transitions")
    )


def path_score(model, emissions, path):
    return reference.path_score(raw_scores(model), emissions, path)


def brute_log_z(model, tag_names, emissions, allowed=None):
    scores = [path_score(model, emissions, p) for p in valid_paths(tag_names, len(emissions), allowed)]
    return logsumexp(scores)


def brute_best(model, tag_names, emissions):
    paths = list(valid_paths(tag_names, len(emissions)))
    scores = [path_score(model, emissions, p) for p in paths]
    return list(paths[int(numpy.argmax(scores))])


def random_emissions(rng, n_tags, lengths=LENGTHS, scale=2.0):
    return [(rng.normal(size=(n, n_tags)) * scale).astype("float32") for n in lengths]


def one_hot(path, n_tags):
    allowed = numpy.zeros((len(path), n_tags), dtype="float32")
    allowed[numpy.arange(len(path)), list(path)] = 1
    return allowed


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_gold_log_likelihood_vs_brute_force(tag_set):
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(1)
    model = make_crf(tag_names, seed=1)
    emissions = random_emissions(rng, n_tags)
    log_zs = [brute_log_z(model, tag_names, em) for em in emissions]
    # Several gold paths per length, all scored in one batch of docs of different lengths.
    golds = [list(valid_paths(tag_names, len(em))) for em in emissions]
    for k in range(3):
        gold = [paths[(k * 7919) % len(paths)] for paths in golds]  # spread over the valid paths
        allowed = [one_hot(path, n_tags) for path in gold]
        log_likelihood = model.predict((emissions, allowed))
        expected = [path_score(model, em, path) - log_z for em, path, log_z in zip(emissions, gold, log_zs)]
        numpy.testing.assert_allclose(log_likelihood, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_log_z_ignores_forbidden_paths(tag_set):
    """The probabilities of all valid paths sum to one: invalid paths get none."""
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    model = make_crf(tag_names, seed=2)
    emissions = random_emissions(numpy.random.default_rng(2), n_tags, lengths=[3])[0]
    paths = list(valid_paths(tag_names, 3))
    allowed = [one_hot(path, n_tags) for path in paths]
    log_likelihood = model.predict(([emissions] * len(paths), allowed))
    assert numpy.exp(log_likelihood.astype("float64")).sum() == pytest.approx(1.0, abs=1e-4)


def test_invalid_gold_has_no_probability():
    tag_names = TAG_SETS["BIOES-1"]
    model = make_crf(tag_names, seed=3)
    emissions = random_emissions(numpy.random.default_rng(3), len(tag_names), lengths=[2])
    ids = {tag: i for i, tag in enumerate(tag_names)}
    for bad in (["O", "I-X"], ["B-X", "O"], ["I-X", "E-X"], ["B-X", "B-X"]):
        path = [ids[tag] for tag in bad]
        log_likelihood = model.predict((emissions, [one_hot(path, len(tag_names))]))
        assert log_likelihood[0] < FORBIDDEN / 2


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_partial_gold_vs_brute_force(tag_set):
    """Several allowed tags at a token: log P = log(sum over consistent valid paths) - log Z."""
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(4)
    model = make_crf(tag_names, seed=4)
    emissions = random_emissions(rng, n_tags)
    allowed = []
    for em in emissions:
        path = next(iter(valid_paths(tag_names, len(em))))
        # The gold path is known at some tokens, open at others; keep one valid path in the mask.
        mask = one_hot(path, n_tags)
        mask[rng.random(len(em)) < 0.5] = 1
        mask = numpy.maximum(mask, rng.random(mask.shape) < 0.3).astype("float32")
        allowed.append(mask)
    allowed[-1][:] = 1  # a fully missing doc: log P == 0
    log_likelihood = model.predict((emissions, allowed))
    expected = [
        brute_log_z(model, tag_names, em, mask) - brute_log_z(model, tag_names, em)
        for em, mask in zip(emissions, allowed)
    ]
    numpy.testing.assert_allclose(log_likelihood, expected, rtol=1e-5, atol=1e-4)
    assert abs(log_likelihood[-1]) < 1e-4


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_viterbi_vs_brute_force(tag_set):
    tag_names = TAG_SETS[tag_set]
    model = make_crf(tag_names, seed=5)
    rng = numpy.random.default_rng(5)
    for _ in range(3):
        emissions = random_emissions(rng, len(tag_names))
        decoded = crf_decode(model, emissions)
        for em, path in zip(emissions, decoded):
            assert path.tolist() == brute_best(model, tag_names, em)


SCHEMES = st.sampled_from([("BIOES", ["X", "Y"]), ("BIO", ["X", "Y"]), ("BIOES", ["X"])])
_MODELS = {}


def cached_crf(scheme, labels):
    key = (scheme, tuple(labels))
    if key not in _MODELS:
        _MODELS[key] = make_crf(get_tag_names(labels, scheme), seed=6)
    return _MODELS[key]


@st.composite
def emission_batches(draw):
    scheme, labels = draw(SCHEMES)
    tag_names = get_tag_names(labels, scheme)
    n_tags = len(tag_names)
    lengths = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    elements = st.one_of(
        st.floats(-1e4, 1e4, width=32),
        st.sampled_from([-1e4, 1e4, 0.0]),
    )
    emissions = []
    for length in lengths:
        em = draw(hnp.arrays("float32", (length, n_tags), elements=elements))
        if draw(st.booleans()):
            # Adversarial: the forbidden continuations (I-, E-) score far above the rest.
            for j, tag in enumerate(tag_names):
                if tag[0] in "IE":
                    em[:, j] += 1e4
        emissions.append(em)
    return scheme, labels, emissions


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(emission_batches())
def test_viterbi_always_valid(batch):
    scheme, labels, emissions = batch
    tag_names = get_tag_names(labels, scheme)
    decoded = crf_decode(cached_crf(scheme, labels), emissions)
    assert [len(path) for path in decoded] == [len(em) for em in emissions]
    for path in decoded:
        assert is_valid_sequence(path.tolist(), tag_names), [tag_names[i] for i in path]


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(emission_batches(), st.randoms(use_true_random=False))
def test_viterbi_stays_in_allowed_mask(batch, random):
    scheme, labels, emissions = batch
    tag_names = get_tag_names(labels, scheme)
    n_tags = len(tag_names)
    masks = []
    for em in emissions:
        # A random valid path, plus random extra tags: the mask always holds a valid path.
        path = spans_path(random, len(em), labels, scheme, tag_names)
        mask = one_hot(path, n_tags)
        for t in range(len(em)):
            for j in range(n_tags):
                if random.random() < 0.3:
                    mask[t, j] = 1
        masks.append(mask)
    decoded = crf_decode(cached_crf(scheme, labels), emissions, masks)
    for path, mask in zip(decoded, masks):
        assert is_valid_sequence(path.tolist(), tag_names)
        assert all(mask[t, tag] for t, tag in enumerate(path.tolist()))


def spans_path(random, length, labels, scheme, tag_names):
    """The tag ids of a random valid tag sequence (random spans, encoded)."""
    spans, start = [], 0
    while start < length:
        end = random.randint(start + 1, length)
        if random.random() < 0.5:
            spans.append((start, end, random.choice(labels)))
        start = end
    return [tag_names.index(tag) for tag in spans_to_tags(spans, length, scheme)]


def test_decode_empty_docs():
    tag_names = TAG_SETS["BIOES-1"]
    model = make_crf(tag_names)
    empty = numpy.zeros((0, len(tag_names)), dtype="float32")
    for emissions in ([empty], [empty, empty]):
        decoded = crf_decode(model, emissions)
        assert [path.shape for path in decoded] == [(0,)] * len(emissions)
    full = numpy.ones((3, len(tag_names)), dtype="float32")
    decoded = crf_decode(model, [empty, full, empty], [empty, full, empty])
    assert [path.shape for path in decoded] == [(0,), (3,), (0,)]
    assert is_valid_sequence(decoded[1].tolist(), tag_names)
    assert crf_decode(model, []) == []


def test_empty_doc_in_training_input_raises():
    tag_names = TAG_SETS["BIO-1"]
    model = make_crf(tag_names)
    empty = numpy.zeros((0, len(tag_names)), dtype="float32")
    full = numpy.ones((2, len(tag_names)), dtype="float32")
    with pytest.raises(ValueError, match="empty doc"):
        model.begin_update(([full, empty], [full, empty]))


def test_init_needs_tag_names():
    with pytest.raises(ValueError, match="tag names"):
        CRF().initialize()
    model = make_crf(TAG_SETS["BIO-1"])
    model.initialize()  # already built: a second init without Y keeps it
    assert torch_module(model).tag_names == TAG_SETS["BIO-1"]
    assert model.get_dim("nO") == 3


def torch_brute_log_likelihood(model, tag_names, emissions, allowed, scores=None):
    """log P(allowed paths) by brute force in float64 torch, differentiable in emissions (and in
    scores, the start, transition and end tensors, when given; else the model's raw scores)."""
    start, transitions, end = scores or (torch.from_numpy(a) for a in raw_scores(model))
    em = torch.from_numpy(emissions.astype("float64")).requires_grad_()

    def log_sum(mask):
        values = []
        for path in valid_paths(tag_names, len(emissions), mask):
            value = start[path[0]] + end[path[-1]] + em[torch.arange(len(path)), list(path)].sum()
            for a, b in zip(path[:-1], path[1:]):
                value = value + transitions[a, b]
            values.append(value)
        return torch.logsumexp(torch.stack(values), dim=0)

    return em, log_sum(allowed) - log_sum(None)


def test_gradient_vs_autograd():
    tag_names = TAG_SETS["BIOES-1"]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(7)
    model = make_crf(tag_names, seed=7)
    emissions = random_emissions(rng, n_tags, lengths=[3, 1, 4])
    allowed = [
        numpy.maximum(
            one_hot(next(iter(valid_paths(tag_names, len(em)))), n_tags), rng.random((len(em), n_tags)) < 0.4
        ).astype("float32")
        for em in emissions
    ]
    d_log_likelihood = rng.normal(size=len(emissions)).astype("float32")
    log_likelihood, backprop = model.begin_update((emissions, allowed))
    d_emissions, d_allowed = backprop(d_log_likelihood)
    assert d_allowed is allowed
    for i, (em, mask) in enumerate(zip(emissions, allowed)):
        tensor, reference = torch_brute_log_likelihood(model, tag_names, em, mask)
        assert log_likelihood[i] == pytest.approx(reference.item(), abs=1e-4)
        (reference * float(d_log_likelihood[i])).backward()
        assert d_emissions[i].shape == em.shape
        numpy.testing.assert_allclose(d_emissions[i], tensor.grad.numpy(), atol=1e-4)


def test_transition_gradients_vs_autograd_of_brute_force():
    """The start, transition and end scores get d log-likelihood / d score, as autograd of the
    brute-force sum over paths gives it; forbidden entries none."""
    tag_names = TAG_SETS["BIOES-1"]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(17)
    model = make_crf(tag_names, seed=17)
    emissions = random_emissions(rng, n_tags, lengths=[3, 1, 4, 2])
    allowed = [
        numpy.maximum(
            one_hot(next(iter(valid_paths(tag_names, len(em)))), n_tags), rng.random((len(em), n_tags)) < 0.4
        ).astype("float32")
        for em in emissions
    ]
    d_log_likelihood = rng.normal(size=len(emissions)).astype("float32")
    _, backprop = model.begin_update((emissions, allowed))
    backprop(d_log_likelihood)
    crf = torch_module(model)
    names = ("start_transitions", "transitions", "end_transitions")
    ours = [crf.parametrizations[name].original.grad.double().numpy() for name in names]
    scores = [torch.from_numpy(a).requires_grad_() for a in raw_scores(model)]
    total = 0.0
    for em, mask, d in zip(emissions, allowed, d_log_likelihood):
        _, log_likelihood = torch_brute_log_likelihood(model, tag_names, em, mask, scores)
        total = total + float(d) * log_likelihood
    total.backward()
    for mine, reference_score in zip(ours, scores):
        numpy.testing.assert_allclose(mine, reference_score.grad.numpy(), atol=1e-5)
    start_ok, transitions_ok, end_ok = allowed_transitions(tag_names)
    assert not ours[1][~transitions_ok].any() and not ours[0][~start_ok].any() and not ours[2][~end_ok].any()


def test_pair_expectations_sum_term_by_term_where_a_side_overflows():
    from spacy_cner.backends.forward_backward import pair_expectations

    rng = numpy.random.default_rng(18)
    before, after = (torch.from_numpy(rng.normal(size=(50, 4))) for _ in range(2))
    transitions, weight = torch.from_numpy(rng.normal(size=(4, 4))), torch.from_numpy(rng.normal(size=50))
    direct = (torch.exp(before[:, :, None] + transitions + after[:, None, :]) * weight[:, None, None]).sum(dim=0)
    numpy.testing.assert_allclose(
        pair_expectations(before, after, transitions, weight).numpy(), direct.numpy(), rtol=1e-10
    )
    # Row 0: the likely tag before cannot go to the likely tags after, and the others are
    # 3,000 nats less likely: one product of exponentials overflows (inf * 0).
    before[0], after[0] = torch.tensor([0.0, -3000, -3000, -3000]), torch.tensor([-3000, 1500.0, 1500.0, 1500.0])
    transitions[0, 1:] = FORBIDDEN
    offset = (before[0].max() - after[0].max()) / 2
    assert not torch.isfinite(torch.exp(before[0] - offset)).all()
    direct = (torch.exp(before[:, :, None] + transitions + after[:, None, :]) * weight[:, None, None]).sum(dim=0)
    result = pair_expectations(before, after, transitions, weight)
    assert torch.isfinite(result).all()
    numpy.testing.assert_allclose(result.numpy(), direct.numpy(), rtol=1e-10)


def test_gradient_vs_finite_differences():
    tag_names = TAG_SETS["BIO-2"]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(8)
    model = make_crf(tag_names, seed=8)
    emissions = random_emissions(rng, n_tags, lengths=[2, 3])
    allowed = [numpy.ones_like(em) for em in emissions]
    allowed[1][1] = one_hot([1], n_tags)[0]  # B-X known at token 1, the rest missing
    _, backprop = model.begin_update((emissions, allowed))
    d_emissions, _ = backprop(numpy.ones(2, dtype="float32"))
    eps = 1e-2
    for i, em in enumerate(emissions):
        for t, j in itertools.product(range(len(em)), range(n_tags)):
            plus, minus = [e.copy() for e in emissions], [e.copy() for e in emissions]
            plus[i][t, j] += eps
            minus[i][t, j] -= eps
            delta = model.predict((plus, allowed)).sum() - model.predict((minus, allowed)).sum()
            numeric = delta / (2 * eps)
            assert d_emissions[i][t, j] == pytest.approx(float(numeric), abs=2e-3)


def test_module_forward_matches_layer():
    """ConstrainedCRF used directly (padded tensors) gives the layer's log-likelihood."""
    tag_names = TAG_SETS["BIOES-1"]
    model = make_crf(tag_names, seed=9)
    crf = torch_module(model)
    assert isinstance(crf, ConstrainedCRF)
    emissions = random_emissions(numpy.random.default_rng(9), len(tag_names), lengths=[3, 1])
    padded = torch.zeros(2, 3, len(tag_names))
    mask = torch.zeros(2, 3, dtype=torch.bool)
    for i, em in enumerate(emissions):
        padded[i, : len(em)] = torch.from_numpy(em)
        mask[i, : len(em)] = True
    allowed = torch.zeros(2, 3, len(tag_names), dtype=torch.bool)
    allowed[0, :, 0] = True  # O O O
    allowed[1, 0, 4] = True  # S-X
    allowed[1, 1:, 0] = True  # padding: ignored
    log_likelihood = crf(padded, mask, allowed).detach().numpy()
    expected = model.predict((emissions, [allowed[0].float().numpy(), allowed[1, :1].float().numpy()]))
    numpy.testing.assert_allclose(log_likelihood, expected, atol=1e-5)


def test_forbidden_scores_are_fixed():
    tag_names = TAG_SETS["BIOES-1"]
    crf = torch_module(make_crf(tag_names))
    start, transitions, end = allowed_transitions(tag_names)
    assert (crf.transitions.detach().numpy()[~transitions] == FORBIDDEN).all()
    assert (crf.start_transitions.detach().numpy()[~start] == FORBIDDEN).all()
    assert (crf.end_transitions.detach().numpy()[~end] == FORBIDDEN).all()
    assert (crf.transitions.detach().numpy()[transitions] > FORBIDDEN).all()


def test_serialization_rebuilds_from_hparams():
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=10)
    data = model.to_bytes()
    fresh = CRF()
    assert torch_module(fresh).tag_names == []
    fresh.from_bytes(data)
    crf, loaded = torch_module(model), torch_module(fresh)
    assert isinstance(loaded, ConstrainedCRF)
    assert loaded.tag_names == tag_names
    assert fresh.get_dim("nO") == len(tag_names)
    for name in ("start_transitions", "transitions", "end_transitions"):
        assert torch.equal(getattr(crf, name), getattr(loaded, name)), name
        assert torch.equal(crf.parametrizations[name].original, loaded.parametrizations[name].original)
    rng = numpy.random.default_rng(10)
    emissions = random_emissions(rng, len(tag_names), lengths=[5, 2, 7])
    for a, b in zip(crf_decode(model, emissions), crf_decode(fresh, emissions)):
        assert a.tolist() == b.tolist()
    allowed = [numpy.ones_like(em) for em in emissions]
    allowed[0][0] = one_hot([0], len(tag_names))[0]
    numpy.testing.assert_array_equal(model.predict((emissions, allowed)), fresh.predict((emissions, allowed)))
    assert fresh.to_bytes() == data


def test_viterbi_equals_pytorch_crf_in_length_groups():
    """The vectorised backtrace and the length groups give pytorch-crf's own paths."""
    tag_names = get_tag_names(["X", "Y", "Z"], "BIOES")
    model = make_crf(tag_names, seed=7)
    crf = torch_module(model)
    rng = numpy.random.default_rng(7)
    lengths = [1, 2, 300, 5, 0, 64, 7, 1000, 3]
    emissions = [rng.normal(0, 3, (n, len(tag_names))).astype("float32") for n in lengths]
    decoded = crf_decode(model, emissions)
    nonempty = [em for em in emissions if len(em)]
    padded = torch.zeros((len(nonempty), max(lengths), len(tag_names)))
    mask = torch.zeros((len(nonempty), max(lengths)), dtype=torch.bool)
    for i, em in enumerate(nonempty):
        padded[i, : len(em)] = torch.from_numpy(em)
        mask[i, : len(em)] = True
    with torch.no_grad(), torch.nn.utils.parametrize.cached():
        expected = iter(crf._viterbi_decode(padded.transpose(0, 1), mask.transpose(0, 1)))
    assert [path.tolist() for path in decoded] == [next(expected) if n else [] for n in lengths]


def test_viterbi_runs_only_the_unfinished_sequences_in_any_order():
    """One viterbi call over sequences of mixed lengths in no particular order (steps past a
    sequence's end compute only the others) gives pytorch-crf's paths, each in its own place."""
    tag_names = get_tag_names(["X", "Y", "Z", "W"], "BIOES")
    model = make_crf(tag_names, seed=11)
    crf = torch_module(model)
    rng = numpy.random.default_rng(11)
    lengths = [5, 1, 9, 5, 2, 9, 1]
    padded = torch.zeros((len(lengths), max(lengths), len(tag_names)))
    mask = torch.zeros((len(lengths), max(lengths)), dtype=torch.bool)
    for i, n in enumerate(lengths):
        padded[i, :n] = torch.from_numpy(rng.normal(0, 3, (n, len(tag_names))).astype("float32"))
        mask[i, :n] = True
    with torch.no_grad():
        decoded = crf.viterbi(padded, mask)
        with torch.nn.utils.parametrize.cached():
            expected = crf._viterbi_decode(padded.transpose(0, 1), mask.transpose(0, 1))
    assert [len(path) for path in decoded] == lengths
    assert [path.tolist() for path in decoded] == expected


def is_entity(path, tag_names, scheme, start, end, label):
    """Whether tokens start..end - 1 of the tag path form one entity of label."""
    tags = [tag_names[i] for i in path]
    if scheme == "BIOES":
        want = (
            [f"S-{label}"] if end - start == 1 else [f"B-{label}"] + [f"I-{label}"] * (end - start - 2) + [f"E-{label}"]
        )
        return tags[start:end] == want
    want = [f"B-{label}"] + [f"I-{label}"] * (end - start - 1)
    return tags[start:end] == want and (end == len(tags) or tags[end] != f"I-{label}")


def random_masks(rng, emissions, labels, scheme, tag_names, share):
    """Per doc, a random valid path's tags plus random extra tags (as preset entities and spaces give)."""
    masks = []
    for em in emissions:
        path = spans_path(random.Random(len(em)), len(em), labels, scheme, tag_names)
        masks.append(numpy.maximum(one_hot(path, len(tag_names)), (rng.random(em.shape) < share).astype("f")))
    return masks


SPAN_TAG_SETS = {"BIOES-2": ("BIOES", ["X", "Y"]), "BIO-2": ("BIO", ["X", "Y"]), "BIO-1": ("BIO", ["X"])}


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("tag_set", sorted(SPAN_TAG_SETS))
def test_span_probabilities_vs_brute_force(tag_set, with_mask):
    scheme, labels = SPAN_TAG_SETS[tag_set]
    tag_names = get_tag_names(labels, scheme)
    model = make_crf(tag_names, seed=11)
    rng = numpy.random.default_rng(11)
    emissions = random_emissions(rng, len(tag_names), lengths=[1, 2, 3, 5])
    masks = random_masks(rng, emissions, labels, scheme, tag_names, 0.5) if with_mask else None
    spans = [
        [(s, e, label) for s in range(len(em)) for e in range(s + 1, len(em) + 1) for label in labels]
        for em in emissions
    ]
    log_probs = span_log_probs(model, emissions, spans, scheme, masks)
    for d, em in enumerate(emissions):
        mask = None if masks is None else masks[d]
        paths = list(valid_paths(tag_names, len(em), mask))
        scores = numpy.asarray([path_score(model, em, p) for p in paths])
        probs = numpy.exp(scores - logsumexp(scores))
        for (start, end, label), log_prob in zip(spans[d], log_probs[d]):
            expected = sum(p for path, p in zip(paths, probs) if is_entity(path, tag_names, scheme, start, end, label))
            assert numpy.exp(log_prob) == pytest.approx(expected, abs=1e-6), (start, end, label)


def test_viterbi_entities_have_probabilities_at_most_one():
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=12)
    emissions = random_emissions(numpy.random.default_rng(12), len(tag_names), lengths=[30, 7])
    decoded = crf_decode(model, emissions)
    spans = [tags_to_spans([tag_names[i] for i in path]) for path in decoded]
    assert any(spans)
    for log_probs in span_log_probs(model, emissions, spans, "BIOES"):
        assert (log_probs <= 1e-9).all() and (log_probs > -50).all()


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
def test_span_probabilities_without_labels(scheme):
    """A CRF with no labels yet (only "O") has no entities in either scheme: its names alone
    would read as BIO, so the scheme it was built in is passed."""
    model = make_crf(["O"])
    emissions = [numpy.zeros((4, 1), dtype="f")]
    assert entity_probabilities(model, emissions, [[]], scheme, threshold=0.0) == [{}]
    assert span_log_probs(model, emissions, [[]], scheme)[0].shape == (0,)


@pytest.mark.parametrize("threshold", [0.05, 0.5])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("tag_set", sorted(SPAN_TAG_SETS))
def test_entity_probabilities_find_every_span_above_the_threshold(tag_set, with_mask, threshold):
    scheme, labels = SPAN_TAG_SETS[tag_set]
    tag_names = get_tag_names(labels, scheme)
    model = make_crf(tag_names, seed=13)
    rng = numpy.random.default_rng(13)
    # Weak emissions: many spans share the probability, so many lie near the threshold.
    emissions = [em / 3 for em in random_emissions(rng, len(tag_names), lengths=[1, 3, 5, 0])]
    masks = random_masks(rng, emissions, labels, scheme, tag_names, 0.6) if with_mask else None
    decoded = crf_decode(model, emissions, masks)
    given = [tags_to_spans([tag_names[i] for i in path]) for path in decoded]
    found = entity_probabilities(model, emissions, given, scheme, threshold, masks)
    for d, em in enumerate(emissions):
        if not len(em):
            assert found[d] == {}
            continue
        mask = None if masks is None else masks[d]
        paths = list(valid_paths(tag_names, len(em), mask))
        scores = numpy.asarray([path_score(model, em, p) for p in paths])
        probs = numpy.exp(scores - logsumexp(scores))
        # Each path's entities (tags_to_spans reads BIO's entity ends as is_entity does).
        totals = {}
        for path, q in zip(paths, probs):
            for span in tags_to_spans([tag_names[i] for i in path]):
                totals[span] = totals.get(span, 0.0) + q
        expected = {span: p for span, p in totals.items() if p >= threshold + 1e-9}
        expected.update({span: totals.get(span, 0.0) for span in given[d]})
        borderline = {span for span in found[d] if span not in expected}
        assert all(found[d][span] >= threshold - 1e-9 and found[d][span] < threshold + 1e-9 for span in borderline)
        assert set(expected) <= set(found[d])
        for span, p in expected.items():
            assert found[d][span] == pytest.approx(p, abs=1e-6), span
    if threshold <= 0.1:  # the test reaches uncertain alternatives, not only sure entities
        assert any(threshold <= p < 0.9 for doc_found in found for p in doc_found.values())


def test_entity_probabilities_in_length_groups_equal_one_doc_at_a_time(monkeypatch):
    """Docs of many lengths split into several forward-backward groups keep their own probabilities."""
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=21)
    rng = numpy.random.default_rng(21)
    emissions = [em / 3 for em in random_emissions(rng, len(tag_names), lengths=[9, 1, 40, 0, 3, 17, 2, 40, 5])]
    alone = [entity_probabilities(model, [em], [[]], "BIOES", 0.05)[0] for em in emissions]
    # No cost per call: each group pads least (a few docs of one length each), at most 2 docs.
    monkeypatch.setattr(crf_posteriors, "LATTICE_GROUP_COST", 0)
    monkeypatch.setattr(crf_posteriors, "LATTICE_MAX_DOCS", 2)
    groups = padded_buckets([len(em) for em in emissions if len(em)], 2, 0)
    assert len(groups) >= 4
    together = entity_probabilities(model, emissions, [[] for _ in emissions], "BIOES", 0.05)
    assert [set(found) for found in together] == [set(found) for found in alone]
    assert any(alone)
    for found, expected in zip(together, alone):
        for span, p in expected.items():
            assert found[span] == pytest.approx(p, abs=1e-12)


def test_no_candidates_above_one():
    tag_names = get_tag_names(["X"], "BIOES")
    model = make_crf(tag_names, seed=14)
    emissions = random_emissions(numpy.random.default_rng(14), len(tag_names), lengths=[6])
    (found,) = entity_probabilities(model, emissions, [[(0, 2, "X")]], "BIOES", 1.1)
    assert list(found) == [(0, 2, "X")]


def _batch(emissions_list, n_tags):
    n = max(len(e) for e in emissions_list)
    emit = torch.zeros((len(emissions_list), n, n_tags), dtype=torch.float64)
    mask = torch.zeros((len(emissions_list), n), dtype=torch.bool)
    for i, e in enumerate(emissions_list):
        emit[i, : len(e)] = torch.from_numpy(numpy.asarray(e, dtype="float64"))
        mask[i, : len(e)] = True
    return emit, mask


def _scores(model):
    crf = torch_module(model)
    with torch.no_grad(), torch.nn.utils.parametrize.cached():
        return tuple(t.double() for t in (crf.transitions, crf.start_transitions, crf.end_transitions))


@pytest.mark.parametrize("product_size", [fb_module.ONE_THREAD_PRODUCT, 162, 1])
def test_scaled_forward_backward_equals_log_space(product_size, monkeypatch):
    """Also when the docs go through in chunks (9 tags: 2 docs at a time at 162 multiply-adds, 1 at 1)."""
    from spacy_cner.backends.forward_backward import log_forward_backward, scaled_forward_backward

    monkeypatch.setattr(fb_module, "ONE_THREAD_PRODUCT", product_size)
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=15)
    rng = numpy.random.default_rng(15)
    emit, mask = _batch(random_emissions(rng, len(tag_names), lengths=[1, 7, 30, 4]), len(tag_names))
    emit[1, 3, 0] = FORBIDDEN  # a masked tag, as preset constraints give
    scaled = scaled_forward_backward(emit, mask, *_scores(model))
    logged = log_forward_backward(emit, mask, *_scores(model))
    numpy.testing.assert_allclose(scaled[2].numpy(), logged[2].numpy(), rtol=1e-10)
    for ours, theirs in zip(scaled[:2], logged[:2]):
        # Padding included: alpha repeats a doc's last step there, beta is the end transition.
        allowed = theirs > FORBIDDEN / 2  # forbidden: -inf here, about -1e9 there
        numpy.testing.assert_allclose(ours[allowed].numpy(), theirs[allowed].numpy(), rtol=1e-9, atol=1e-9)
        assert (ours[~allowed] < FORBIDDEN / 2).all()


def test_forward_backward_falls_back_to_log_space_when_the_scaled_sums_underflow():
    from spacy_cner.backends.forward_backward import forward_backward, log_forward_backward, scaled_forward_backward

    tag_names = get_tag_names(["X"], "BIOES")  # O B-X I-X E-X S-X
    model = make_crf(tag_names, seed=16)
    index = {tag: i for i, tag in enumerate(tag_names)}
    # Token 0 may only be B-X; at token 1 every tag B-X can go to is 800 below O:
    # exp(-800) is 0 in float64, so the scaled forward sum underflows.
    first = numpy.full(len(tag_names), FORBIDDEN)
    first[index["B-X"]] = 0.0
    second = numpy.zeros(len(tag_names))
    second[[index["I-X"], index["E-X"]]] = -800.0
    emit, mask = _batch([[first, second]], len(tag_names))
    assert scaled_forward_backward(emit, mask, *_scores(model)) is None
    result = forward_backward(emit, mask, *_scores(model))
    expected = log_forward_backward(emit, mask, *_scores(model))
    assert torch.isfinite(result[2]).all()
    numpy.testing.assert_allclose(result[2].numpy(), expected[2].numpy())
    (log_probs,) = span_log_probs(model, [numpy.stack([first, second]).astype("f")], [[(0, 2, "X")]], "BIOES")
    assert log_probs[0] == pytest.approx(0.0, abs=1e-9)  # the only allowed path


def test_log_likelihood_falls_back_to_log_space_when_the_scaled_sums_underflow(monkeypatch):
    """Training's scaled forward sum underflows on the same extreme scores; the log-space
    forward-backward takes over, the log-likelihood still matches brute force and its gradient
    is finite."""
    tag_names = get_tag_names(["X"], "BIOES")  # O B-X I-X E-X S-X
    model = make_crf(tag_names, seed=16)
    index = {tag: i for i, tag in enumerate(tag_names)}
    emissions = numpy.zeros((2, len(tag_names)), dtype="float32")
    emissions[0, :] = -800.0
    emissions[0, index["B-X"]] = 0.0  # token 0: B-X, every other tag 800 below (exp underflows in float32)
    emissions[1, [index["I-X"], index["E-X"]]] = -800.0
    gold = numpy.zeros((2, len(tag_names)), dtype="float32")
    gold[0, index["B-X"]] = gold[1, index["E-X"]] = 1.0
    calls = []
    original = fb_module.log_forward_backward
    monkeypatch.setattr(fb_module, "log_forward_backward", lambda *a: calls.append(1) or original(*a))
    (log_likelihood,), backprop = model.begin_update(([emissions], [gold]))
    assert calls, "the log-space fallback did not run"
    expected = path_score(model, emissions, (index["B-X"], index["E-X"])) - brute_log_z(model, tag_names, emissions)
    assert numpy.isfinite(log_likelihood)
    assert log_likelihood == pytest.approx(expected, abs=1e-3)
    (d_emissions,), _ = backprop(numpy.ones(1, dtype="float32"))
    assert numpy.isfinite(d_emissions).all()


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_candidates_stay_linear_on_a_long_doc_of_uncertain_tags(scheme):
    """Near-uniform tags over a long doc (a run of one character, no punctuation): B's and I's
    marginals are above the threshold everywhere, so spans whose tags all pass it are quadratic in number;
    the candidates stay within len / threshold, and still hold every span that is
    at least that probable (checked against all spans of a shorter doc)."""
    tag_names = get_tag_names(["X"], scheme)
    model = make_crf(tag_names, seed=3)
    threshold = 0.05
    for length in (60, 3000):
        emissions = [numpy.zeros((length, len(tag_names)), dtype="float32")]
        ((_, lattice),) = list(crf_posteriors._lattices(model, emissions, [length], None, scheme, temperature=20.0))
        marginals = lattice.marginals()[0]
        assert (marginals[:-1, tag_names.index("B-X")] >= threshold).all()
        assert (marginals[1:-1, tag_names.index("I-X")] >= threshold).all()
        candidates = lattice.candidates(threshold)
        assert len(candidates) <= length / threshold
        if length == 60:
            every = [(0, (s, e, "X")) for s in range(length) for e in range(s + 1, length + 1)]
            probable = {key for key, p in zip(every, numpy.exp(lattice.span_log_probs(every))) if p >= threshold}
            assert probable and probable <= set(candidates)


def reference_candidates(lattice, threshold):
    """_Lattice.candidates one prefix and one token at a time, in plain Python (its first form)."""
    marginals = lattice.marginals()
    columns, labels, scheme = lattice.tag_set.columns, lattice.tag_set.labels, lattice.tag_set.scheme
    found = set()
    for b, length in enumerate(lattice.lengths.tolist()):
        for k, label in enumerate(labels):
            above = {p: marginals[b, :length, columns[p][k]] >= threshold for p in columns}
            if scheme == "BIOES":
                found |= {(b, (t, t + 1, label)) for t in numpy.flatnonzero(above["S"]).tolist()}
            for start in numpy.flatnonzero(above["B"]).tolist():
                B, I = int(columns["B"][k]), int(columns["I"][k])
                if scheme == "BIO":
                    found.add((b, (start, start + 1, label)))
                path, tag = float(lattice.log_alpha(b, start, B)), B
                for t in range(start + 1, length):
                    if scheme == "BIOES" and above["E"][t]:
                        found.add((b, (start, t + 1, label)))
                    path += float(lattice.transitions[tag, I] + lattice.emit[b, t, I])
                    tag = I
                    if path + float(lattice.log_beta(b, t, I) - lattice.log_z[b]) < numpy.log(threshold):
                        break
                    if scheme == "BIO":
                        found.add((b, (start, t + 1, label)))
    return found


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
@pytest.mark.parametrize("steps", [1, 2, 16])
def test_candidate_prefixes_grown_in_blocks_equal_one_token_at_a_time(scheme, steps, monkeypatch):
    """Blocks of 1, 2 and 16 tokens (prefixes crossing blocks, docs ending inside one) find the spans
    the loop over prefixes and tokens finds."""
    monkeypatch.setattr(crf_posteriors, "CANDIDATE_STEPS", steps)
    tag_names = get_tag_names(["X", "Y"], scheme)
    model = make_crf(tag_names, seed=22)
    rng = numpy.random.default_rng(22)
    emissions = [em / 4 for em in random_emissions(rng, len(tag_names), lengths=[1, 2, 7, 30, 12])]
    lattices = list(crf_posteriors._lattices(model, emissions, [len(em) for em in emissions], None, scheme))
    n_found = 0
    for _, lattice in lattices:
        for threshold in (0.01, 0.2):
            found = lattice.candidates(threshold)
            assert len(found) == len(set(found))
            assert set(found) == reference_candidates(lattice, threshold)
            n_found += len(found)
    assert n_found > 20


def test_paths_on_the_host_are_the_paths():
    """crf_decode(on_host=True), as crf_ner decodes: numpy tag ids, the same paths (no copy per doc to a
    device and back on a GPU)."""
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=23)
    emissions = random_emissions(numpy.random.default_rng(23), len(tag_names), lengths=[5, 0, 9, 1])
    on_host = crf_decode(model, emissions, on_host=True)
    assert all(isinstance(path, numpy.ndarray) and path.dtype == numpy.int32 for path in on_host)
    assert [p.tolist() for p in on_host] == [model.ops.to_numpy(p).tolist() for p in crf_decode(model, emissions)]


def test_chain_posteriors_in_length_groups_equal_the_span_probabilities_marginals(monkeypatch):
    """chain_posteriors (distillation's soft targets) and token_marginals share one batching loop
    (_padded_groups), each grouping the docs its own way: the same marginals, a doc's in any group as alone,
    its expected transition counts summing to its transitions, its entropy that of its paths."""
    tag_names = get_tag_names(["X", "Y"], "BIOES")
    model = make_crf(tag_names, seed=22)
    rng = numpy.random.default_rng(22)
    emissions = random_emissions(rng, len(tag_names), lengths=[9, 1, 40, 3, 17, 2, 40, 5])
    alone = [crf_posteriors.chain_posteriors(model, [em], temperature=1.5)[0] for em in emissions]
    monkeypatch.setattr(crf_posteriors, "LATTICE_BATCH_TOKENS", 40)  # several groups
    together = crf_posteriors.chain_posteriors(model, emissions, temperature=1.5)
    marginals = crf_posteriors.token_marginals(model, emissions, "BIOES", temperature=1.5)
    for em, one, found, expected in zip(emissions, alone, together, marginals):
        assert isinstance(found.marginals, numpy.ndarray) and isinstance(found.counts, numpy.ndarray)
        numpy.testing.assert_allclose(found.marginals, one.marginals, atol=1e-12)
        numpy.testing.assert_allclose(found.marginals, expected, atol=1e-9)
        assert found.counts.sum() == pytest.approx(len(em) - 1, abs=1e-9)
        assert found.entropy == pytest.approx(one.entropy, abs=1e-9) and found.piece_counts is None
    (short,) = crf_posteriors.chain_posteriors(model, [emissions[3]])
    scores = [path_score(model, emissions[3], path) for path in valid_paths(tag_names, 3)]
    probabilities = numpy.exp(numpy.asarray(scores) - logsumexp(scores))
    assert short.entropy == pytest.approx(float(-(probabilities * numpy.log(probabilities)).sum()), abs=1e-9)
    with pytest.raises(ValueError, match="empty sequence"):
        crf_posteriors.chain_posteriors(model, [emissions[0], emissions[0][:0]])
