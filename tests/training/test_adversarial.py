"""FGM/FGSM adversarial training: a harder second pass, embeddings restored bit for bit."""

import numpy
import pytest
import spacy
import torch
from thinc.api import SGD, fix_random_seed

from spacy_cner.training.adversarial import EmbeddingAttack, fgm, fgsm

from conftest import TRAIN_DATA, make_examples

ENCODER = {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 16, "dropout": 0.0}
CPU_TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "char_rows": 200,
    "bigram_rows": 300,
    "dropout": 0.0,
    "bigram_dropout": 0.0,
}

# Exact bigram tables (KeyEmbed): the attack moves the rows the batch touched.
CPU_EXACT_TOK2VEC = {**CPU_TOK2VEC, "@architectures": "spacy-cner.CharBigramEmbed.v2", "bigram_rows": None}


def transformer_tok2vec(path):
    return {"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(path)}


def make_nlp(tok2vec, **settings):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": ENCODER}
    nlp.add_pipe("crf_ner", config={"model": model, **settings})
    examples = make_examples(nlp, TRAIN_DATA[:3])
    nlp.initialize(lambda: examples)
    return nlp, examples


def embedding_matrices(nlp):
    """Copies of every matrix an attack perturbs."""
    model = nlp.get_pipe("crf_ner").model
    tables = [node.get_param("E").copy() for node in model.walk() if node.name in ("hashembed", "key_embed")]
    for node in model.walk():
        for shim in node.shims:
            if hasattr(shim._model, "get_input_embeddings"):
                tables.append(shim._model.get_input_embeddings().weight.detach().numpy().copy())
    return tables


@pytest.fixture(params=["cpu", "cpu_exact", "transformer"])
def tok2vec(request, tiny_bert):
    tok2vecs = {"cpu": CPU_TOK2VEC, "cpu_exact": CPU_EXACT_TOK2VEC}
    return tok2vecs[request.param] if request.param in tok2vecs else transformer_tok2vec(tiny_bert)


@pytest.mark.parametrize(
    "attack", [{"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0}, {"@misc": "spacy-cner.fgsm.v1", "epsilon": 0.05}]
)
def test_adversarial_loss_is_higher_and_embeddings_are_restored(tok2vec, attack):
    nlp, examples = make_nlp(tok2vec, adversarial=attack)
    before = embedding_matrices(nlp)
    assert before
    losses = nlp.get_pipe("crf_ner").update(examples)  # no optimizer: the weights must not move
    assert losses["crf_ner_adversarial"] > losses["crf_ner"] > 0
    for saved, now in zip(before, embedding_matrices(nlp)):
        numpy.testing.assert_array_equal(saved, now)


def test_adversarial_pass_adds_its_gradients(tok2vec):
    """The update's gradients are the clean pass's plus the perturbed pass's."""
    grads = {}
    for attack in (None, {"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0}):
        nlp, examples = make_nlp(tok2vec, adversarial=attack)
        output_layer = nlp.get_pipe("crf_ner").model.get_ref("output_layer")
        nlp.get_pipe("crf_ner").update(examples)
        grads[attack is None] = output_layer.get_grad("W").copy()
    assert not numpy.allclose(grads[True], grads[False])


def test_adversarial_pass_reuses_the_gold_constraints(monkeypatch):
    """An update reads each example's gold once for both passes; get_loss outside an update reads it afresh."""
    from spacy_cner.pipeline import crf_ner as crf_ner_module

    nlp, examples = make_nlp(CPU_TOK2VEC, adversarial={"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0})
    ner = nlp.get_pipe("crf_ner")
    read = []
    monkeypatch.setattr(crf_ner_module, "aligned_ner", lambda eg: read.append(eg) or eg.get_aligned_ner())
    ner.update(examples)
    assert len(read) == len(examples)
    # Outside an update nothing is cached: new gold for the same example objects counts.
    scores = ner.model.predict([eg.predicted for eg in examples])
    loss_before, _ = ner.get_loss(examples, scores)
    examples[0].reference.set_ents([], default="outside")
    loss_after, _ = ner.get_loss(examples, scores)
    assert len(read) == 3 * len(examples)
    assert loss_after != pytest.approx(loss_before)


def test_training_with_fgm_learns(tok2vec):
    nlp, examples = make_nlp(tok2vec, adversarial={"@misc": "spacy-cner.fgm.v1", "epsilon": 0.5})
    optimizer = nlp.create_optimizer()
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    assert nlp.evaluate(examples)["ents_f"] == 1.0


def test_perturbation_maths():
    gradient = numpy.asarray([[3.0, 0.0], [-4.0, 0.0]])
    numpy.testing.assert_allclose(fgm(2.0).perturbation(numpy, gradient), [[1.2, 0.0], [-1.6, 0.0]])
    numpy.testing.assert_allclose(fgsm(0.1).perturbation(numpy, gradient), [[0.1, 0.0], [-0.1, 0.0]])
    assert not fgm(1.0).perturbation(numpy, numpy.zeros((2, 2))).any()
    # An overflowed gradient (mixed precision): no attack, not a nan perturbation.
    for attack in (fgm(1.0), fgsm(0.1)):
        for bad in (float("inf"), float("nan")):
            overflowed = numpy.array([[bad, 1.0], [-2.0, 0.0]], dtype="float32")
            assert not attack.perturbation(numpy, overflowed).any()
            assert not attack.perturbation(torch, torch.from_numpy(overflowed)).any()
    # Finite entries whose squares overflow float32: still a unit direction times epsilon.
    huge = numpy.array([[3e30, 0.0], [-4e30, 0.0]], dtype="float32")
    numpy.testing.assert_allclose(fgm(2.0).perturbation(numpy, huge), [[1.2, 0.0], [-1.6, 0.0]], rtol=1e-6)
    r = fgm(0.7).perturbation(torch, torch.randn(5, 3))
    assert float(r.norm()) == pytest.approx(0.7)


@pytest.mark.parametrize("method,epsilon", [("pgd", 1.0), ("fgm", 0.0)])
def test_bad_settings_raise(method, epsilon):
    with pytest.raises(ValueError):
        EmbeddingAttack(method, epsilon)


def test_no_embeddings_to_attack_raises():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("tok2vec")
    listener = {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "*"}
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": listener, "encoder": ENCODER}
    nlp.add_pipe("crf_ner", config={"model": model, "adversarial": {"@misc": "spacy-cner.fgm.v1"}})
    examples = make_examples(nlp, TRAIN_DATA[:3])
    optimizer = nlp.initialize(lambda: examples)
    with pytest.raises(ValueError, match="found no embedding matrix"):
        nlp.update(examples, sgd=optimizer)


def test_tok2vec_learn_rate_scale(tok2vec):
    """With plain SGD, the tok2vec's weights move scale times as far; the layers above as before."""
    moves = {}
    for scale in (1.0, 0.25):
        nlp, examples = make_nlp(tok2vec, tok2vec_learn_rate_scale=scale)
        model = nlp.get_pipe("crf_ner").model
        tables = embedding_matrices(nlp)
        output_before = model.get_ref("output_layer").get_param("W").copy()
        nlp.update(examples, sgd=SGD(0.1))
        moved = [numpy.abs(after - before).sum() for before, after in zip(tables, embedding_matrices(nlp))]
        output_moved = numpy.abs(model.get_ref("output_layer").get_param("W") - output_before).sum()
        moves[scale] = (sum(moved), output_moved)
    assert moves[0.25][0] == pytest.approx(0.25 * moves[1.0][0], rel=1e-3)
    assert moves[0.25][1] == pytest.approx(moves[1.0][1], rel=1e-5)


def test_attacks_resolve_in_a_fresh_process():
    """A config naming @misc = "spacy-cner.fgm.v1" resolves without importing spacy_cner (entry points)."""
    import subprocess
    import sys

    code = "from spacy.util import registry; print(registry.misc.get('spacy-cner.fgsm.v1')(0.1).method)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fgsm"


def test_every_k_updates_runs_the_second_pass_on_every_kth_update_only():
    """adversarial.every = 2: the perturbed pass (and its loss) at updates 0, 2, 4; the clean pass
    alone in between."""
    nlp, examples = make_nlp(CPU_TOK2VEC, adversarial={"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0, "every": 2})
    pipe = nlp.get_pipe("crf_ner")
    attacked = ["crf_ner_adversarial" in pipe.update(examples, sgd=SGD(0.01)) for _ in range(5)]
    assert attacked == [True, False, True, False, True]
    assert nlp.get_pipe("crf_ner").adversarial == fgm(1.0, every=2)
    with pytest.raises(ValueError, match="at least 1"):
        fgm(1.0, every=0)


def test_a_large_train_corpus_is_attacked_at_large_every(capsys):
    """large_corpus: crf_ner's initialize counts the train corpus's tokens (saved in cfg and logged
    where the rule applies); above large_corpus the attack runs at every large_every-th update."""
    attack = {"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0, "large_every": 2}
    tokens = sum(len(eg.reference) for eg in make_examples(spacy.blank("zh"), TRAIN_DATA[:3]))
    for large_corpus, expected in ((tokens - 1, [True, False, True, False]), (tokens, [True] * 4), (0, [True] * 4)):
        nlp, examples = make_nlp(CPU_TOK2VEC, adversarial={**attack, "large_corpus": large_corpus})
        pipe = nlp.get_pipe("crf_ner")
        assert pipe.cfg["train_tokens"] == tokens
        logged = capsys.readouterr().out
        assert (f"train corpus of {tokens:,} tokens" in logged) == (expected[1] is False)
        assert ["crf_ner_adversarial" in pipe.update(examples, sgd=SGD(0.01)) for _ in range(4)] == expected
    # The count is saved with the pipe: a loaded pipe trained on keeps the rule.
    nlp, examples = make_nlp(CPU_TOK2VEC, adversarial={**attack, "large_corpus": tokens - 1})
    loaded = spacy.util.load_model_from_config(nlp.config).from_bytes(nlp.to_bytes())
    pipe = loaded.get_pipe("crf_ner")
    assert pipe.cfg["train_tokens"] == tokens
    assert ["crf_ner_adversarial" in pipe.update(examples, sgd=SGD(0.01)) for _ in range(2)] == [True, False]
    assert EmbeddingAttack("fgm", 1.0, 1, 10, 3).every_for(11) == 3
    assert EmbeddingAttack("fgm", 1.0, 1, 10, 3).every_for(None) == 1
    with pytest.raises(ValueError, match="large_every"):
        fgm(1.0, large_corpus=5, large_every=0)
    with pytest.raises(ValueError, match="large_corpus"):
        fgm(1.0, large_corpus=-5)


def test_without_an_attack_initialize_reads_the_first_docs_only():
    """initialize validates and samples the first ten examples, and counts the train corpus for the attack's
    large-corpus rule only: without an attack (a distilled student, whose corpus can be millions of
    characters with soft targets) it reads twenty examples of sixty; with one, the whole corpus once more."""
    examples = make_examples(spacy.blank("zh"), TRAIN_DATA * 20)
    tokens = sum(len(eg.reference) for eg in examples)
    for adversarial, expected, counted in (
        (None, 20, None),
        ({"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0}, 20 + len(examples), tokens),
    ):
        nlp = spacy.blank("zh")
        model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": CPU_TOK2VEC, "encoder": ENCODER}
        pipe = nlp.add_pipe("crf_ner", config={"model": model, "adversarial": adversarial})
        for label in ("LOC", "ORG", "PER"):
            pipe.add_label(label)
        read = []

        def get_examples():
            for eg in examples:
                read.append(eg)
                yield eg

        nlp.initialize(get_examples)
        assert len(read) == expected
        assert pipe.cfg["train_tokens"] == counted
        # The pipe initialized from its first examples trains.
        assert "crf_ner" in pipe.update(examples[:3], sgd=SGD(0.01))
    # A corpus whose first examples are not Examples still fails spaCy's check.
    with pytest.raises(TypeError):
        nlp.initialize(lambda: iter([{"text": "我"}]))


def test_a_share_of_the_batch_is_attacked_and_stands_for_the_whole_batch(monkeypatch):
    """share = 0.5: the second pass runs on half the batch's examples (drawn at random), its loss and
    gradients (the CRF's transitions too) scaled by 2. On a batch of one example four times (no
    dropout) any half scaled by 2 gives the whole batch's second pass exactly."""
    from spacy_cner.pipeline import crf_ner as crf_ner_module

    taken = []
    take = crf_ner_module._take
    monkeypatch.setattr(crf_ner_module, "_take", lambda X, indices: taken.append(indices) or take(X, indices))
    results = {}
    for share in (1.0, 0.5, None):
        attack = {"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0} if share else None
        nlp, _ = make_nlp(CPU_TOK2VEC, adversarial={**attack, "share": share} if attack else None)
        examples = make_examples(nlp, TRAIN_DATA[:1] * 4)
        pipe = nlp.get_pipe("crf_ner")
        losses = pipe.update(examples)
        grads = [pipe.model.get_ref("output_layer").get_grad("W").copy()]
        grads += [
            node.get_grad(name).copy()
            for node in pipe.model.walk()
            for name in node.grad_names
            if node.name != "output_layer"
        ]
        results[share] = (losses, grads)
    assert [len(indices) for indices in taken] == [2]  # share 1 attacks the whole batch without taking
    assert results[0.5][0]["crf_ner_adversarial"] == pytest.approx(results[1.0][0]["crf_ner_adversarial"], rel=1e-5)
    assert results[0.5][0]["crf_ner"] == results[1.0][0]["crf_ner"]
    for half, whole, clean in zip(results[0.5][1], results[1.0][1], results[None][1]):
        numpy.testing.assert_allclose(half, whole, rtol=1e-4, atol=1e-6)
    assert not all(numpy.allclose(whole, clean) for whole, clean in zip(results[1.0][1], results[None][1]))


def test_attacked_draws_the_share_of_a_batch():
    import random

    random.seed(0)
    draws = [fgm(1.0, share=0.25).attacked(10) for _ in range(200)]
    assert all(len(d) == 2 and d == sorted(set(d)) and 0 <= min(d) and max(d) < 10 for d in draws)
    assert len({tuple(d) for d in draws}) > 20  # drawn afresh each update
    assert len(fgm(1.0, share=0.1).attacked(3)) == 1  # at least one example
    assert fgm(1.0, share=0.25).attacked(1) is None  # one example: the whole batch
    assert fgm(1.0).attacked(10) is None  # share 1: the whole batch, as before
    random.seed(0)
    assert [fgm(1.0, share=0.25).attacked(10) for _ in range(200)] == draws  # seeded by the training's seed
    for bad in (0.0, 1.5, -0.5):
        with pytest.raises(ValueError, match="share"):
            fgm(1.0, share=bad)
