"""Distillation (spacy_cner.training.distill): the teacher's soft targets and the student's loss against
brute force over all tag sequences, a student that learns its teacher's entities, and the CLI's resume."""
import itertools
import os
import subprocess
import sys

import numpy
import pytest
import spacy
import torch
from spacy.tokens import DocBin
from thinc.api import fix_random_seed

from conftest import REPO_ROOT, TRAIN_DATA, make_examples, write_docs
from reference import valid_paths
from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.crf import CRF
from spacy_cner.tags import allowed_transitions, get_tag_names
from spacy_cner.training.distill import (
    SOFT_TARGETS,
    SoftTargets,
    chain_soft_targets,
    product_counts,
    read_soft_targets,
    soft_targets_record,
    teacher_student_loss,
)

TAG_SETS = {"BIOES-1": get_tag_names(["X"], "BIOES"), "BIO-2": get_tag_names(["X", "Y"], "BIO")}
LENGTHS = [1, 2, 3, 4]
NAMES = ("start_transitions", "transitions", "end_transitions")


def make_crf(tag_names, seed):
    """An initialized CRF layer with random raw scores (forbidden entries fixed by the layer)."""
    model = CRF()
    model.initialize(Y=tag_names)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in NAMES:
            original = torch_module(model).parametrizations[name].original
            original.copy_(torch.randn(original.shape, generator=generator))
    return model


def raw_scores(model, requires_grad=False):
    """The CRF's raw start, transition and end scores as float64 tensors."""
    crf = torch_module(model)
    return [crf.parametrizations[name].original.detach().double().clone().requires_grad_(requires_grad) for name in NAMES]


def path_scores(scores, emissions, paths):
    """s(y) of each path, differentiable in the torch inputs; shape (n_paths,)."""
    start, transitions, end = scores
    values = []
    for path in paths:
        value = start[path[0]] + end[path[-1]] + emissions[torch.arange(len(path)), list(path)].sum()
        for a, b in zip(path[:-1], path[1:]):
            value = value + transitions[a, b]
        values.append(value)
    return torch.stack(values)


def brute_distribution(scores, emissions, tag_names, temperature):
    """(paths, log P_T(path)) over every path the scheme allows."""
    paths = list(valid_paths(tag_names, len(emissions)))
    values = path_scores(scores, emissions, paths) / temperature
    return paths, values - torch.logsumexp(values, dim=0)


def random_emissions(rng, n_tags, lengths=LENGTHS, scale=2.0):
    return [(rng.normal(size=(n, n_tags)) * scale).astype("float32") for n in lengths]


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_teacher_targets_vs_brute_force(tag_set, temperature):
    """Marginals, expected transition counts and entropy of the teacher's chain, as enumeration gives them."""
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(3)
    teacher = make_crf(tag_names, seed=3)
    emissions = random_emissions(rng, n_tags)
    found = chain_soft_targets(teacher, emissions, temperature=temperature)
    scores = raw_scores(teacher)
    for em, targets in zip(emissions, found):
        paths, log_p = brute_distribution(scores, torch.from_numpy(em).double(), tag_names, temperature)
        p = log_p.exp().numpy()
        marginals = numpy.zeros((len(em), n_tags))
        counts = numpy.zeros((n_tags, n_tags))
        for path, prob in zip(paths, p):
            marginals[numpy.arange(len(em)), list(path)] += prob
            for a, b in zip(path[:-1], path[1:]):
                counts[a, b] += prob
        numpy.testing.assert_allclose(targets.marginals, marginals, atol=1e-9)
        numpy.testing.assert_allclose(targets.counts, counts, atol=1e-9)
        assert targets.entropy == pytest.approx(float(-(p * log_p.numpy()).sum()), abs=1e-8)
        assert targets.temperature == temperature


def brute_loss(student_scores, student_emissions, teacher_log_p, paths, tag_names, temperature):
    """T^2 KL(q || p_T) by enumeration, differentiable in the student's emissions and scores."""
    values = path_scores(student_scores, student_emissions, paths) / temperature
    log_p = values - torch.logsumexp(values, dim=0)
    q = teacher_log_p.exp()
    return temperature**2 * (q * (teacher_log_p - log_p)).sum()


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_loss_and_gradients_vs_brute_force(tag_set, temperature):
    """teacher_student_loss is T^2 KL(teacher || student) over tag sequences, and its gradients in the
    student's emissions and start, transition and end scores are autograd's of the enumerated KL."""
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(11)
    teacher, student = make_crf(tag_names, seed=11), make_crf(tag_names, seed=12)
    teacher_emissions = random_emissions(rng, n_tags)
    student_emissions = random_emissions(rng, n_tags)
    targets = chain_soft_targets(teacher, teacher_emissions, temperature=temperature)
    d_loss = rng.uniform(0.5, 2.0)
    losses, d_emissions = teacher_student_loss(student, student_emissions, targets, scale=d_loss)
    ours = [torch_module(student).parametrizations[name].original.grad.double().numpy() for name in NAMES]
    scores = raw_scores(student, requires_grad=True)
    total = 0.0
    for i, (t_em, s_em) in enumerate(zip(teacher_emissions, student_emissions)):
        paths, teacher_log_p = brute_distribution(raw_scores(teacher), torch.from_numpy(t_em).double(), tag_names,
                                                  temperature)
        em = torch.from_numpy(s_em).double().requires_grad_()
        kl = brute_loss(scores, em, teacher_log_p, paths, tag_names, temperature)
        assert losses[i] == pytest.approx(d_loss * kl.item(), rel=1e-4, abs=1e-5)
        assert kl.item() > 0
        (d_loss * kl).backward(retain_graph=True)
        numpy.testing.assert_allclose(d_emissions[i], em.grad.numpy(), atol=1e-4)
        total = total + kl
    start_ok, transitions_ok, end_ok = allowed_transitions(tag_names)
    for mine, reference, ok in zip(ours, scores, (start_ok, transitions_ok, end_ok)):
        # Forbidden scores are fixed: the layer gives them no gradient (brute force sees none of their paths).
        numpy.testing.assert_allclose(mine[ok], reference.grad.numpy()[ok], atol=1e-4)
        assert not mine[~ok].any()


def test_loss_is_zero_for_the_teacher_itself():
    """The teacher as its own student: KL 0 and no gradient, with targets stored as in the shards
    (float16 marginals, float32 counts)."""
    tag_names = TAG_SETS["BIOES-1"]
    teacher = make_crf(tag_names, seed=5)
    emissions = random_emissions(numpy.random.default_rng(5), len(tag_names), lengths=[6, 3])
    stored = [read_soft_targets(soft_targets_record(t), tag_names) for t in chain_soft_targets(teacher, emissions)]
    assert stored[0].marginals.dtype == numpy.float16
    losses, d_emissions = teacher_student_loss(teacher, emissions, stored)
    assert numpy.abs(losses).max() < 1e-3
    assert max(numpy.abs(d).max() for d in d_emissions) < 2e-3


def test_product_counts_when_pairs_are_unknown():
    """Without the teacher's counts the loss uses sum_t q_t (x) q_t+1 on the allowed transitions: the
    emissions' gradient, T (p - q), does not depend on the counts; forbidden pairs get none."""
    tag_names = TAG_SETS["BIOES-1"]
    rng = numpy.random.default_rng(9)
    teacher = make_crf(tag_names, seed=9)
    emissions = random_emissions(rng, len(tag_names), lengths=[5, 4])
    targets = chain_soft_targets(teacher, emissions)
    _, allowed, _ = allowed_transitions(tag_names)
    for t in targets:
        product = product_counts(t.marginals, allowed)
        assert not product[~allowed].any()
        assert product.sum() <= len(t.marginals) - 1 + 1e-9
    student = make_crf(tag_names, seed=10)
    _, with_counts = teacher_student_loss(student, emissions, targets)
    without = [SoftTargets(t.tags, t.marginals, None, t.entropy, t.temperature) for t in targets]
    _, without_counts = teacher_student_loss(make_crf(tag_names, seed=10), emissions, without)
    for a, b in zip(with_counts, without_counts):
        numpy.testing.assert_allclose(a, b, atol=1e-6)


def test_targets_in_the_students_tag_order():
    """Targets stored in the teacher's tag order are read in the student's; other tags are an error."""
    tag_names = get_tag_names(["A", "B"], "BIOES")
    rng = numpy.random.default_rng(1)
    targets = chain_soft_targets(make_crf(tag_names, seed=1), random_emissions(rng, len(tag_names), lengths=[4]))[0]
    student_tags = get_tag_names(["B", "A"], "BIOES")
    reordered = targets.in_order(student_tags)
    for j, tag in enumerate(student_tags):
        i = tag_names.index(tag)
        numpy.testing.assert_array_equal(reordered.marginals[:, j], targets.marginals[:, i])
        for k, other in enumerate(student_tags):
            assert reordered.counts[j, k] == targets.counts[i, tag_names.index(other)]
    with pytest.raises(ValueError, match="teacher's labels and scheme"):
        targets.in_order(get_tag_names(["A", "B"], "BIO"))
