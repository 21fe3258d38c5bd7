"""Distillation (spacy_cner.training.distill): the teacher's soft targets and the student's loss against
brute force over all tag sequences, a student that learns its teacher's entities, and the CLI's resume."""

import itertools
import json
import os
import subprocess
import sys
import time
from fnmatch import fnmatch

import numpy
import pytest
import spacy
import srsly
import torch
from spacy.tokens import DocBin
from thinc.api import fix_random_seed

from conftest import REPO_ROOT, TRAIN_DATA, make_examples, write_docs
from reference import valid_paths
from spacy_cner.annotate.job import AnnotateJob
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
    return [
        crf.parametrizations[name].original.detach().double().clone().requires_grad_(requires_grad) for name in NAMES
    ]


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
        paths, teacher_log_p = brute_distribution(
            raw_scores(teacher), torch.from_numpy(t_em).double(), tag_names, temperature
        )
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


# The teacher of the end-to-end tests: a small BiLSTM-CRF overfit to the toy corpus.
TEACHER_MODEL = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {
        "@architectures": "spacy-cner.CharBigramEmbed.v1",
        "width": 32,
        "char_rows": 500,
        "bigram_rows": 1000,
        "bigram_dropout": 0.0,
    },
    "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0},
}
# Unlabeled text for the student: new sentences of the toy corpus's characters (and an empty line).
UNLABELED = ["王五在深圳工作", "张三住在北京市", "", "李四去了广州", "腾讯的员工在上海"]
STUDENT_CONFIG = REPO_ROOT / "configs" / "student.cfg"


def entities(docs):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in docs]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A teacher pipeline overfit to TRAIN_DATA, the train and dev splits and an unlabeled text file."""
    folder = tmp_path_factory.mktemp("distill")
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": TEACHER_MODEL})
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    assert nlp.evaluate(make_examples(nlp))["ents_f"] == 1.0
    nlp.to_disk(folder / "teacher")
    (folder / "unlabeled.txt").write_text("\n".join(UNLABELED) + "\n", encoding="utf8")
    return {
        "teacher": folder / "teacher",
        "train": write_docs(folder / "train.spacy"),
        "dev": write_docs(folder / "dev.spacy", TRAIN_DATA[:3]),
        "text": folder / "unlabeled.txt",
    }


def test_student_reproduces_the_teachers_entities(corpus, tmp_path, fake_lac_sdist):
    """A student of another architecture (configs/student.cfg: a CNN window encoder over hash embeddings and
    LAC's vectors, here a fabricated sdist's on their 3 principal directions), trained on the teacher's soft
    targets alone (gold weight 0), tags the train and unlabeled texts as its teacher does."""
    from spacy_cner.training.distill import distill

    summary = distill(
        AnnotateJob(str(corpus["teacher"])),
        STUDENT_CONFIG,
        tmp_path / "out",
        train=corpus["train"],
        dev=corpus["dev"],
        texts=[corpus["text"]],
        gold_weight=0.0,
        max_steps=100,
        progress=False,
        overrides={
            "training.max_epochs": 0,
            "training.eval_frequency": 25,
            "paths.lac_sdist": str(fake_lac_sdist),
            "initialize.before_init.projected_width": 3,
        },
    )
    assert summary.teacher.docs == len(TRAIN_DATA) + len(UNLABELED)
    assert summary.student == tmp_path / "out" / "model-best" and summary.student.is_dir()
    texts = [text for text, _ in TRAIN_DATA] + [text for text in UNLABELED if text]
    teacher = spacy.load(corpus["teacher"])
    student = spacy.load(tmp_path / "out" / "model-last")
    assert student.vocab.vectors.shape[1] == 3 and student.vocab.vectors.data.dtype == numpy.float16
    assert student.get_pipe("crf_ner").labels == teacher.get_pipe("crf_ner").labels
    found = entities(student.pipe(texts))
    assert found == entities(teacher.pipe(texts))
    assert all(found)
    # The config's calibration fitted a threshold on dev: the best path stays the default, the threshold one
    # override away.
    pipe = student.get_pipe("crf_ner")
    assert pipe.entity_threshold is None and 0.1 <= pipe.cfg["fitted_threshold"] <= 0.5
    at_threshold = spacy.load(
        tmp_path / "out" / "model-last", config={"components": {"crf_ner": {"ents_threshold": "fitted"}}}
    )
    assert at_threshold.get_pipe("crf_ner").entity_threshold == pipe.cfg["fitted_threshold"]
    assert entities(at_threshold.pipe(texts)) == found


def teacher_pass(corpus, output, **settings):
    """distill's teacher pass alone (no student trained) of the corpus fixture's teacher into output."""
    from spacy_cner.training.distill import distill

    return distill(
        AnnotateJob(str(corpus["teacher"])),
        STUDENT_CONFIG,
        output,
        train=corpus["train"],
        dev=corpus["dev"],
        progress=False,
        train_student=False,
        **settings,
    )


def test_the_corpus_reader_gives_soft_targets_and_gold(corpus, tmp_path):
    """spacy-cner.distill_corpus.v1: every non-empty text with its targets; the train split's with its
    gold doc and the gold weight, the unlabeled ones without gold (weight 0)."""
    from spacy_cner.training.distill import create_distill_corpus

    teacher_pass(corpus, tmp_path, texts=[corpus["text"]])
    nlp = spacy.blank("zh")
    examples = list(create_distill_corpus(tmp_path / "teacher", corpus["train"], gold_weight=0.3)(nlp))
    assert len(examples) == len(TRAIN_DATA) + len(UNLABELED) - 1
    by_text = {eg.predicted.text: eg for eg in examples}
    for text, ents in TRAIN_DATA:
        eg = by_text[text]
        assert [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents] == ents
        assert eg.predicted.user_data[SOFT_TARGETS].gold_weight == 0.3
    for text in filter(None, UNLABELED):
        targets = by_text[text].predicted.user_data[SOFT_TARGETS]
        assert targets.gold_weight == 0.0 and not by_text[text].reference.has_annotation("ENT_IOB")
        numpy.testing.assert_allclose(targets.marginals.astype("float64").sum(axis=1), 1.0, atol=2e-3)
    assert "ents_threshold = null" in (tmp_path / "student.cfg").read_text(encoding="utf8")
    # Called again without the unlabeled text: its cached shards are kept but not read.
    teacher_pass(corpus, tmp_path, texts=[""])
    assert len(list((tmp_path / "teacher" / "shards").glob("text_*.spacy"))) == 1
    assert len(list(create_distill_corpus(tmp_path / "teacher", corpus["train"])(nlp))) == len(TRAIN_DATA)
    # Another train split than the teacher read: refused, not paired by index with other texts.
    from spacy.tokens import DocBin

    other = tmp_path / "other.spacy"
    DocBin(docs=[spacy.blank("zh")(text + "。") for text, _ in TRAIN_DATA]).to_disk(other)
    with pytest.raises(ValueError, match="pass the same train split"):
        list(create_distill_corpus(tmp_path / "teacher", other)(nlp))


def test_augmented_texts_are_labelled_by_the_teacher(corpus, tmp_path):
    """augment: mention-replaced copies of the train texts (none a dev text) go through the teacher pass
    and come back as examples without gold; a call without augment reads them no more."""
    from spacy_cner.training.distill import create_distill_corpus

    summary = teacher_pass(corpus, tmp_path, augment=2)
    (augmented,) = (tmp_path / "teacher" / "inputs").glob("augmented_*")
    assert augmented.name == "augmented_2x.jsonl"
    new_texts = [json.loads(line)["text"] for line in augmented.read_text(encoding="utf8").splitlines()]
    train_texts = {text for text, _ in TRAIN_DATA}
    assert new_texts and not set(new_texts) & train_texts
    assert summary.teacher.docs == len(TRAIN_DATA) + len(new_texts)
    nlp = spacy.blank("zh")
    examples = list(create_distill_corpus(tmp_path / "teacher", corpus["train"])(nlp))
    by_text = {eg.predicted.text: eg for eg in examples}
    assert set(by_text) == train_texts | set(new_texts)
    for text in new_texts:
        assert by_text[text].predicted.user_data[SOFT_TARGETS].gold_weight == 0.0
        assert not by_text[text].reference.has_annotation("ENT_IOB")
    teacher_pass(corpus, tmp_path)
    assert not list((tmp_path / "teacher" / "inputs").glob("augmented_*"))
    assert len(list(create_distill_corpus(tmp_path / "teacher", corpus["train"])(nlp))) == len(TRAIN_DATA)


def stored_targets(shards):
    """text -> marginals of every doc in the teacher's shards."""
    out = {}
    for shard in sorted(shards.glob("*.spacy")):
        for doc in DocBin().from_disk(shard).get_docs(spacy.blank("zh").vocab):
            if SOFT_TARGETS in doc.user_data:
                out[doc.text] = numpy.asarray(doc.user_data[SOFT_TARGETS]["marginals"], dtype="float64")
    return out


def test_cli_resumes_the_teacher_pass_after_a_kill(corpus, tmp_path, toy_vectors):
    """`distill` killed in its teacher pass (after its first shard) and run again: the shards written
    before are kept as they were (not recomputed), the rest written, the targets those of one pass. The
    student reads toy vectors (--paths.vectors, a config override) instead of fetching LAC's."""
    texts = [
        f"{name}在{place}工作"
        for name, place in itertools.product(["张三", "李四", "王五"] * 50, ["北京市", "上海", "深圳", "广州"])
    ]
    (tmp_path / "many.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    output = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "spacy_cner",
        "distill",
        str(corpus["teacher"]),
        str(STUDENT_CONFIG),
        "--train",
        str(corpus["train"]),
        "--dev",
        str(corpus["dev"]),
        "--text",
        str(tmp_path / "many.txt"),
        "--output",
        str(output),
        "--shard-size",
        "25",
        "--batch-size",
        "8",
        "--max-steps",
        "2",
        "--quiet",
        "--paths.vectors",
        str(toy_vectors),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    shards = output / "teacher" / "shards"
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    try:
        while process.poll() is None and not list(shards.glob("text_*_many.*.spacy")):
            assert time.monotonic() < deadline, "no shard of the unlabeled text after 10 minutes"
            time.sleep(0.05)
    finally:
        process.kill()
        output_before_kill = process.communicate()[0].decode("utf8", "replace")[-3000:]
    assert process.returncode != 0 or list(shards.glob("text_*_many.*.spacy")), output_before_kill
    before = {path.name: path.stat().st_mtime_ns for path in shards.glob("*.spacy")}
    n_shards = -(-len(texts) // 25)
    assert 1 <= sum(fnmatch(name, "text_*_many.*") for name in before) < n_shards, (
        "the kill came after the teacher pass"
    )
    pipeline_meta = (output / "teacher" / "pipeline" / "meta.json").stat().st_mtime_ns
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"{len(before)} already done" in " ".join(result.stdout.split())
    after = {path.name: path.stat().st_mtime_ns for path in shards.glob("*.spacy")}
    assert sum(fnmatch(name, "text_*_many.*") for name in after) == n_shards
    assert all(after[name] == mtime for name, mtime in before.items())
    assert (output / "teacher" / "pipeline" / "meta.json").stat().st_mtime_ns == pipeline_meta
    assert (output / "model-best").is_dir()
    # The same targets as one uninterrupted pass computes.
    teacher = spacy.load(output / "teacher" / "pipeline")
    stored = stored_targets(shards)
    assert len(stored) == len(set(texts)) + len(TRAIN_DATA)
    for doc in teacher.pipe(sorted(set(texts))[:40]):
        numpy.testing.assert_array_equal(stored[doc.text], doc.user_data[SOFT_TARGETS]["marginals"].astype("float64"))


def test_crf_ner_mixes_the_kl_and_the_gold_loss(corpus):
    """crf_ner.get_loss of examples with soft targets: teacher_student_loss plus gold_weight times the gold
    negative log-likelihood (an example without targets: its gold loss alone, weight 1)."""
    nlp = spacy.load(corpus["teacher"])
    pipe = nlp.get_pipe("crf_ner")
    examples = make_examples(nlp)[:3]
    scores = pipe.model.predict([eg.predicted for eg in examples])
    rng = numpy.random.default_rng(2)
    other = make_crf(pipe.tag_names, seed=2)
    targets = chain_soft_targets(other, [rng.normal(size=s.shape).astype("f") for s in scores[:2]], temperature=2.0)
    for eg, t, weight in zip(examples, targets, (0.25, 0.0)):
        eg.predicted.user_data[SOFT_TARGETS] = SoftTargets(t.tags, t.marginals, t.counts, t.entropy, 2.0, weight)
    loss, d_scores = pipe.get_loss(examples, scores)
    kl, d_kl = teacher_student_loss(pipe.model.get_ref("crf"), scores[:2], targets)
    # The KL alone, as spaCy v4's pipes name it (teacher's side first).
    kl_sum, d_alone = pipe.get_teacher_student_loss(targets, scores[:2])
    assert kl_sum == pytest.approx(float(kl.sum()), rel=1e-6)
    numpy.testing.assert_allclose(d_alone[0], d_kl[0], atol=1e-6)
    plain = make_examples(nlp)[:3]
    gold = [pipe.get_loss([eg], [s]) for eg, s in zip(plain, scores)]
    assert loss == pytest.approx(float(kl.sum()) + 0.25 * gold[0][0] + gold[2][0], rel=1e-5)
    numpy.testing.assert_allclose(d_scores[0], d_kl[0] + 0.25 * gold[0][1][0], atol=1e-5)
    numpy.testing.assert_allclose(d_scores[1], d_kl[1], atol=1e-6)
    numpy.testing.assert_allclose(d_scores[2], gold[2][1][0], atol=1e-6)


def test_a_teacher_folder_keeps_its_teacher_and_temperature(corpus, tmp_path):
    """Soft targets cached at one temperature are read at it; another temperature (or teacher) for the same
    output is refused, naming the folder, rather than mixing two teachers' shards."""
    from spacy_cner.training.distill import create_distill_corpus

    teacher_pass(corpus, tmp_path, temperature=2.0)
    examples = list(create_distill_corpus(tmp_path / "teacher", corpus["train"])(spacy.blank("zh")))
    assert {eg.predicted.user_data[SOFT_TARGETS].temperature for eg in examples} == {2.0}
    with pytest.raises(ValueError, match="another teacher or temperature"):
        teacher_pass(corpus, tmp_path, temperature=1.0)


@pytest.mark.parametrize("tag_set", sorted(TAG_SETS))
def test_piece_targets_are_the_chains_marginal_over_each_piece_vs_brute_force(tag_set):
    """A long doc's pieces (the windows the student trains on): each one's expected transition counts and
    entropy are those of the teacher's distribution marginalised onto the piece, as enumeration gives them."""
    tag_names = TAG_SETS[tag_set]
    n_tags = len(tag_names)
    rng = numpy.random.default_rng(5)
    teacher = make_crf(tag_names, seed=5)
    (emissions,) = random_emissions(rng, n_tags, lengths=[5])
    ranges = [(0, 2), (2, 3), (3, 5)]
    (targets,) = chain_soft_targets(teacher, [emissions], temperature=1.5, pieces=[ranges])
    paths, log_p = brute_distribution(raw_scores(teacher), torch.from_numpy(emissions).double(), tag_names, 1.5)
    assert targets.pieces.ranges() == ranges
    for k, (start, end) in enumerate(ranges):
        marginal = {}
        for path, prob in zip(paths, log_p.exp().tolist()):
            marginal[tuple(path[start:end])] = marginal.get(tuple(path[start:end]), 0.0) + prob
        counts = numpy.zeros((n_tags, n_tags))
        for piece, prob in marginal.items():
            for a, b in zip(piece[:-1], piece[1:]):
                counts[a, b] += prob
        numpy.testing.assert_allclose(targets.pieces.counts[k], counts, atol=1e-9)
        entropy = -sum(prob * numpy.log(prob) for prob in marginal.values() if prob > 0)
        assert targets.pieces.entropy[k] == pytest.approx(entropy, abs=1e-8)
    (whole,) = chain_soft_targets(teacher, [emissions], temperature=1.5, pieces=[[(0, 5)]])
    numpy.testing.assert_allclose(whole.pieces.counts[0], whole.counts, atol=1e-12)
    assert whole.pieces.entropy[0] == pytest.approx(whole.entropy, abs=1e-9)


def test_the_student_trains_on_a_long_lines_windows(corpus, tmp_path):
    """Issue 85: the student's loss ran over a whole unlabeled line (a 1M-character line took 9.79 GB, then
    "can't allocate memory"). The corpus now gives a long doc's windows, as the teacher predicted them, each
    with the teacher's targets over it: every example at most the window, the texts tiling the line, a train
    doc's gold entities kept where no window edge cuts them; an update on them runs."""
    from spacy_cner.training.distill import create_distill_corpus, distill

    window = 8
    teacher = spacy.load(corpus["teacher"], config={"components": {"crf_ner": {"long_doc_window": window}}})
    teacher.to_disk(tmp_path / "teacher")
    one_sentence = "王五在深圳工作" * 12  # no sentence end: overlapping windows, one chain
    sentences = "张三住在北京市。" * 10  # a sentence end every 8 characters: each window its own chain
    (tmp_path / "long.txt").write_text(one_sentence + "\n" + sentences + "\n", encoding="utf8")
    gold_text = "".join(text for text, _ in TRAIN_DATA)
    offsets = numpy.cumsum([0] + [len(text) for text, _ in TRAIN_DATA])
    gold_ents = [
        (int(a + offset), int(b + offset), label)
        for (_, ents), offset in zip(TRAIN_DATA, offsets)
        for a, b, label in ents
    ]
    train = write_docs(tmp_path / "train.spacy", [(gold_text, gold_ents)])
    distill(
        AnnotateJob(str(tmp_path / "teacher")),
        STUDENT_CONFIG,
        tmp_path / "out",
        train=train,
        dev=corpus["dev"],
        texts=[tmp_path / "long.txt"],
        progress=False,
        train_student=False,
    )
    nlp = spacy.load(tmp_path / "teacher")
    examples = list(create_distill_corpus(tmp_path / "out" / "teacher", train, gold_weight=0.5)(nlp))
    assert max(len(eg.predicted) for eg in examples) <= window
    stored = stored_targets(tmp_path / "out" / "teacher" / "shards")
    for text in (gold_text, one_sentence, sentences):
        pieces = [eg for eg in examples if eg.predicted.text in text]
        assert "".join(eg.predicted.text for eg in pieces) == text and len(pieces) >= len(text) // window
        marginals = numpy.concatenate([eg.predicted.user_data[SOFT_TARGETS].marginals for eg in pieces])
        numpy.testing.assert_allclose(marginals, stored[text], atol=1e-3)
        for eg in pieces:
            targets = eg.predicted.user_data[SOFT_TARGETS]
            assert targets.pieces is None and targets.counts.sum() == pytest.approx(len(eg.predicted) - 1, abs=1e-3)
            assert targets.gold_weight == (0.5 if text == gold_text else 0.0)
    # Windows that end at sentence ends are independent chains: their entropies add up to the line's.
    record = next(
        doc.user_data[SOFT_TARGETS]
        for shard in (tmp_path / "out" / "teacher" / "shards").glob("text_*.spacy")
        for doc in DocBin().from_disk(shard).get_docs(nlp.vocab)
        if doc.text == sentences
    )
    assert record["piece_entropy"].sum() == pytest.approx(record["entropy"], rel=1e-5)
    # The gold entities of the train doc, but those a window's edge cuts (left unannotated there).
    found, cut = set(), 0
    for eg in examples:
        if eg.predicted.text in gold_text:
            start = gold_text.index(eg.predicted.text)  # each piece's text is unique in the toy doc
            found |= {(e.start_char + start, e.end_char + start, e.label_) for e in eg.reference.ents}
            cut += sum(token.ent_iob == 0 for token in eg.reference)
    assert found and found <= set(gold_ents)
    assert cut == sum(b - a for a, b, _ in set(gold_ents) - found)
    losses = nlp.update(examples, sgd=nlp.resume_training())
    assert numpy.isfinite(losses["crf_ner"])


def test_texts_of_the_dev_or_test_split_are_refused(corpus, tmp_path):
    """Issue 85: `distill --text` took the dev split's own texts (its help says never to), and the student
    was then chosen on that dev. Texts found in dev (or --test) are refused, naming how many and where,
    before the teacher pass."""
    from typer.testing import CliRunner

    from spacy_cner.cli import app

    test = write_docs(tmp_path / "test.spacy", TRAIN_DATA[4:])
    lines = ["王五在深圳工作", TRAIN_DATA[0][0], " " + TRAIN_DATA[1][0], TRAIN_DATA[4][0], TRAIN_DATA[0][0]]
    (tmp_path / "mixed.txt").write_text("\n".join(lines) + "\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"--text holds 3 texts of the held-out splits \(3 in .*mixed\.txt of dev "):
        teacher_pass(corpus, tmp_path / "out", texts=[tmp_path / "mixed.txt"])
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(
        app,
        [
            "distill",
            str(corpus["teacher"]),
            str(STUDENT_CONFIG),
            "--train",
            str(corpus["train"]),
            "--dev",
            str(corpus["dev"]),
            "--test",
            str(test),
            "--text",
            str(tmp_path / "mixed.txt"),
            "--output",
            str(tmp_path / "out"),
            "-q",
        ],
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and said.count("✘") == 1 and "--text holds 4 texts" in said, result.output
    assert "the first at line 2" in said and "1 in" in said and "of test" in said
    assert not (tmp_path / "out").exists()


def test_distill_max_steps_before_the_first_evaluation_evaluates_at_its_last_step(capsys):
    """spaCy's loop evaluates at step 0 and every eval_frequency steps: --max-steps 100 under an
    eval_frequency of 200 would score only the untrained student, and model-best would be it."""
    from spacy_cner.training.distill import evaluation_within

    config = {"training": {"eval_frequency": 200}}
    assert evaluation_within(config, {}, 100) == {"training.eval_frequency": 100}
    assert "evaluating at step 100" in capsys.readouterr().out
    assert evaluation_within(config, {}, 200) == {}
    assert evaluation_within(config, {}, 0) == {}  # no limit
    assert evaluation_within(config, {"training.eval_frequency": 50}, 100) == {}


def test_distill_warns_when_model_best_is_the_untrained_student(tmp_path, capsys):
    from spacy_cner.training.distill import warn_if_untrained_best

    def curve(*scores):
        rows = [{"step": 100 * i, "score": score} for i, score in enumerate(scores)]
        srsly.write_jsonl(tmp_path / "training_curve.jsonl", rows)
        warn_if_untrained_best(tmp_path)
        return capsys.readouterr().out

    assert "untrained student of step 0" in curve(0.2, 0.1, 0.15)
    assert "untrained" not in curve(0.0, 0.0)  # a tie: spaCy's loop keeps the later checkpoint
    assert "untrained" not in curve(0.2, 0.3, 0.1)


@pytest.mark.parametrize("setting", [{"text_field": "body"}, {"entities_field": "ents"}, {"uncertainty": "entropy"}])
def test_distill_refuses_a_teacher_job_setting_its_pass_would_not_use(setting, tmp_path):
    """The teacher pass reads the "text" field of the inputs it writes and stores soft targets: a job asking
    for another text field, entities field or an uncertainty score is refused before anything is written."""
    from spacy_cner.training.distill import distill

    name = next(iter(setting))
    with pytest.raises(ValueError, match=f"distill's teacher pass does not use {name}="):
        distill(AnnotateJob("teacher", **setting), STUDENT_CONFIG, tmp_path / "out", train=tmp_path, dev=tmp_path)
    assert not (tmp_path / "out").exists()
