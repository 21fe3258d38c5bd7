"""spacy-cner.LacFeatures.v2 fine-tuned (LAC's tagger as a trained encoder) on a fabricated LAC sdist
(tests/fake_lac.py): the GRU's hand-written gradient against autograd, gradients to every trained weight and none
to a frozen one, the gradient through the layer's alignment, the scalar mix fixed to one layer, the adapter without
matches, the embeddings' row-wise update, the learning-rate scale, FGM on the embeddings, save/load and batching."""

import numpy
import pytest
import spacy
import torch
from spacy.util import registry
from thinc.api import Adam, Config

from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.lac_features import POSITIONS
from spacy_cner.lexicon import token_means, token_means_backward
from spacy_cner.layers.lexicon_slot import set_lexicon
from spacy_cner.lexicon import Lexicon
from spacy_cner.pipeline.optimizer import apply_gradients
from spacy_cner.pretrained.lac_net import BiGRULayer
from spacy_cner.training.adversarial import fgm

from conftest import LEXICON_WORDS, REPO_ROOT, train_from_config, write_corpus
from fake_lac import HIDDEN, TAGS

TEXTS = ["张三去了北京市工作", "", "上海", "阿里巴巴的员工 在 中国。李四住在广州！王五", "萬１ab首都"]

MIX = '[m.scalar_mix]\n@layers = "spacy-cner.ScalarMix.v1"\n'
ADAPTER = '[m.lexicon_adapter]\n@layers = "spacy-cner.LexiconAdapter.v1"\nword_width = 8\nword_rows = 50\n'


def make_docs(texts=TEXTS):
    nlp = spacy.blank("zh")
    return [nlp.make_doc(text) for text in texts]


def encoder(sdist, *blocks, lexicon=None, docs=None, **settings):
    """A fine-tuned LacFeatures.v2 layer over the fake sdist, initialized."""
    settings = {"fine_tune": "true", "sdist": f'"{sdist}"', **settings}
    text = '[m]\n@layers = "spacy-cner.LacFeatures.v2"\n' + "".join(f"{k} = {v}\n" for k, v in settings.items())
    layer = registry.resolve(Config().from_str(text + "".join(blocks)))["m"]
    if layer.has_ref("lexicon_adapter"):
        set_lexicon(layer.get_ref("lexicon_adapter"), lexicon if lexicon is not None else Lexicon(LEXICON_WORDS))
    layer.initialize(X=docs if docs is not None else make_docs())
    return layer


def lac_parameters(layer):
    return dict(torch_module(layer).network.named_parameters())


def run_backward(layer, docs, seed=0):
    """One training pass with random output gradients; RETURNS the outputs and the loss's weights (sum(Y * R))."""
    rng = numpy.random.default_rng(seed)
    Y, backprop = layer(docs, is_train=True)
    weights = [rng.normal(size=y.shape).astype("float32") for y in Y]
    backprop(weights)
    return Y, weights


def test_the_gru_scans_gradient_is_autograds_over_paddles_steps():
    """BiGRUScan's hand-written backward gives autograd's gradient over PaddleGRU's plain steps (float64), for the
    inputs and every weight, padding and paddle's clipped sigmoids included."""
    torch.manual_seed(0)
    layer = BiGRULayer(5, 4).double()
    for parameter in layer.parameters():
        parameter.data.normal_(0, 1.5)  # large enough that some gates reach paddle's clips
        parameter.requires_grad_(True)
    inputs = (torch.randn(3, 7, 5, dtype=torch.double) * 4.0).requires_grad_(True)
    lengths = torch.tensor([7, 4, 1])
    mask = (torch.arange(7)[None] < lengths[:, None]).unsqueeze(-1).double()
    output = layer(inputs, lengths)
    reference = torch.cat(
        [
            layer.forward_gru(layer.forward_fc(inputs), lengths),
            layer.backward_gru(layer.backward_fc(inputs), lengths),
        ],
        dim=-1,
    )
    torch.testing.assert_close(output * mask, reference * mask, rtol=1e-12, atol=1e-12)
    d_output = torch.randn_like(output) * mask
    wrt = [inputs] + list(layer.parameters())
    got = torch.autograd.grad((output * d_output).sum(), wrt)
    expected = torch.autograd.grad((reference * d_output).sum(), wrt)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("frozen_layers", [0, 1, 2])
def test_gradients_reach_every_trained_lac_weight_and_no_frozen_one(fake_lac_sdist, frozen_layers):
    layer = encoder(fake_lac_sdist, MIX, ADAPTER, frozen_layers=frozen_layers)
    run_backward(layer, make_docs())
    for name, parameter in lac_parameters(layer).items():
        frozen = (
            name == "crf_weights"
            or (name == "embedding.weight" and frozen_layers >= 1)
            or (name.startswith("layers.0.") and frozen_layers >= 2)
        )
        if frozen:
            assert parameter.grad is None, name
        else:
            assert parameter.grad is not None and float(parameter.grad.abs().sum()) > 0, name
    adapter = torch_module(layer.get_ref("lexicon_adapter"))
    assert all(p.grad is not None for name, p in adapter.named_parameters() if "norm" not in name)
    mix = layer.get_ref("scalar_mix")
    assert mix.has_grad("alpha") and numpy.abs(mix.get_grad("alpha")).sum() > 0


def test_the_backprop_is_the_gradient_of_the_features(fake_lac_sdist):
    """The loss sum(Y * R) is linear in the emission fc's bias and in the mix's gamma: moving either changes it by
    exactly the gradient's inner product with the move (up to float32 rounding), through the units' alignment to
    characters, the windows and the tokens' means."""
    layer = encoder(fake_lac_sdist, MIX, window_size=4, sentences="false")
    docs = make_docs()
    Y, weights = run_backward(layer, docs)
    bias = lac_parameters(layer)["emission.bias"]
    mix = layer.get_ref("scalar_mix")

    def loss():
        return sum(float((y * w).sum()) for y, w in zip(layer.predict(docs), weights))

    before = loss()
    assert before == pytest.approx(sum(float((y * w).sum()) for y, w in zip(Y, weights)), rel=1e-5)
    move = torch.linspace(-0.5, 0.5, TAGS)
    with torch.no_grad():
        bias += move
    assert loss() - before == pytest.approx(float((move * bias.grad).sum()), rel=1e-3)
    with torch.no_grad():
        bias -= move
    gamma = mix.get_param("gamma").copy()
    mix.set_param("gamma", gamma + 0.25)
    assert loss() - before == pytest.approx(0.25 * float(mix.get_grad("gamma")[0]), rel=1e-3)


def test_token_means_backward_is_the_adjoint_of_token_means():
    rng = numpy.random.default_rng(0)
    chars = rng.normal(size=(9, 3)).astype("float32")
    spans = numpy.asarray([[0, 1], [1, 4], [4, 4], [4, 6], [6, 9]])
    d_tokens = rng.normal(size=(len(spans), 3)).astype("float32")
    left = float((token_means(chars, spans) * d_tokens).sum())
    right = float((chars * token_means_backward(d_tokens, spans, len(chars))).sum())
    assert left == pytest.approx(right, rel=1e-5)


@pytest.mark.parametrize("layer_index", [0, 1, 2])
def test_the_mix_fixed_to_one_layer_is_that_layer_exactly(fake_lac_sdist, layer_index):
    layer = encoder(fake_lac_sdist, MIX, emissions="false")
    mix = layer.get_ref("scalar_mix")
    alpha = numpy.full(3, -1e4, dtype="float32")
    alpha[layer_index] = 0.0
    mix.set_param("alpha", alpha)
    docs = make_docs(["张三去了北京市工作"])
    (features,) = layer.predict(docs)
    module = torch_module(layer)
    ids, lengths = module.tagger.ids(docs[0].text)
    with torch.no_grad():
        states = module.network.layer_states(torch.tensor([ids]), torch.tensor([len(ids)]))
    expected = states[layer_index][0].numpy()
    if layer_index == 0:  # the embeddings tiled to the states' width
        expected = numpy.tile(expected, (1, -(-2 * HIDDEN // expected.shape[1])))[:, : 2 * HIDDEN]
    unit = numpy.repeat(numpy.arange(len(lengths)), lengths)
    numpy.testing.assert_array_equal(features[:, : 2 * HIDDEN], expected[unit])
    assert features.shape[1] == 2 * HIDDEN + len(POSITIONS)


def test_the_adapter_without_matches_leaves_lacs_outputs_unchanged(fake_lac_sdist):
    """No lexicon word over any unit: the adapter adds nothing, even after training moved its weights."""
    docs = make_docs()
    plain = encoder(fake_lac_sdist, MIX)
    adapted = encoder(fake_lac_sdist, MIX, ADAPTER, lexicon=Lexicon(["不在文中", "没有的词"]))
    adapter = torch_module(adapted.get_ref("lexicon_adapter"))
    with torch.no_grad():
        for parameter in adapter.parameters():
            parameter.normal_(0, 1.0)
    for a, b in zip(plain.predict(docs), adapted.predict(docs)):
        numpy.testing.assert_array_equal(a, b)
    matched = encoder(fake_lac_sdist, MIX, ADAPTER)
    with torch.no_grad():
        for parameter in torch_module(matched.get_ref("lexicon_adapter")).parameters():
            parameter.normal_(0, 1.0)
    assert not numpy.array_equal(plain.predict(docs)[0], matched.predict(docs)[0])  # 北京市 and 工作 match


def test_the_embeddings_are_updated_on_the_rows_the_batch_read_at_the_lac_rate(fake_lac_sdist):
    layer = encoder(fake_lac_sdist, learn_rate_scale=0.5)
    model = spacy_model(layer)
    docs = make_docs(["张三去了北京市工作"])
    params = lac_parameters(layer)
    before = {name: p.detach().clone() for name, p in params.items()}
    run_backward(layer, docs)
    ids = set(torch_module(layer).tagger.ids(docs[0].text)[0])
    apply_gradients(model, Adam(0.01), 1.0)
    moved = (params["embedding.weight"] != before["embedding.weight"]).any(dim=1)
    assert set(torch.nonzero(moved).flatten().tolist()) == ids
    # Adam's first step moves a weight with a gradient by the learning rate: LAC's at half of it.
    step = (params["layers.1.forward_gru.state_weight"].detach() - before["layers.1.forward_gru.state_weight"]).abs()
    assert float(step.max()) == pytest.approx(0.005, rel=1e-3)
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0 for p in params.values())


def spacy_model(layer):
    """A model holding the layer as its tok2vec (apply_gradients reads the "tok2vec" ref)."""
    from thinc.api import Model

    return Model("holder", lambda model, X, is_train: (X, lambda d: d), layers=[layer], refs={"tok2vec": layer})


def test_fgm_perturbs_lacs_embeddings_and_puts_them_back(fake_lac_sdist):
    layer = encoder(fake_lac_sdist, frozen_layers=0)
    run_backward(layer, make_docs())
    weight = lac_parameters(layer)["embedding.weight"]
    saved = weight.detach().clone()
    attack = fgm(epsilon=1.0)
    restore = attack.perturb(layer)
    moved = weight.detach() - saved
    assert float(moved.norm()) == pytest.approx(1.0, rel=1e-4)
    restore()
    assert torch.equal(weight.detach(), saved)
    frozen = encoder(fake_lac_sdist, frozen_layers=1)
    assert torch_module(frozen).get_input_embeddings() is None


def test_settings_that_need_fine_tuning_are_refused(fake_lac_sdist):
    with pytest.raises(ValueError, match="need fine_tune = true"):
        encoder(fake_lac_sdist, MIX, fine_tune="false")
    # Frozen, LAC's weights take no update: a rate or frozen layers for them would be ignored.
    for setting in ({"learn_rate_scale": 0.1}, {"frozen_layers": 1}):
        with pytest.raises(ValueError, match="need fine_tune = true"):
            encoder(fake_lac_sdist, fine_tune="false", **setting)
    with pytest.raises(ValueError, match="projected_width"):
        encoder(fake_lac_sdist, projected_width=8)
    with pytest.raises(ValueError, match="train_cache_mb"):
        encoder(fake_lac_sdist, train_cache_mb=64)
    with pytest.raises(ValueError, match="frozen_layers"):
        encoder(fake_lac_sdist, frozen_layers=3)
    with pytest.raises(ValueError, match="n_layers"):
        encoder(fake_lac_sdist, MIX + "n_layers = 4\n")


def test_a_fine_tuned_pipeline_saves_loads_and_batches_alike(fake_lac_sdist, tmp_path):
    """configs/lac_lebert.cfg (fine-tuned LAC, mix, adapter, FGM) trained a few steps on the toy corpus, saved in
    float32: loaded, saved again and loaded it predicts identically, and a doc alone and in a batch gets the same
    entities."""
    overrides = {
        **write_corpus(tmp_path),
        "paths.lac_sdist": str(fake_lac_sdist),
        "training.max_steps": 6,
        "training.eval_frequency": 3,
        "training.max_epochs": 0,
        "components.crf_ner.save_weights": "float32",
        "components.crf_ner.model.encoder.width": 16,
    }
    train_from_config(REPO_ROOT / "configs" / "lac_lebert.cfg", tmp_path / "out", overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    nlp.to_disk(tmp_path / "again")
    again = spacy.load(tmp_path / "again")
    texts = ["张三去了北京市工作", "李四住在广州。王五在上海", "阿里巴巴的员工"]

    def entities(pipeline, batch_size):
        return [
            [(e.start_char, e.end_char, e.label_, e._.score) for e in doc.ents]
            for doc in pipeline.pipe(texts, batch_size=batch_size)
        ]

    assert entities(again, 3) == entities(nlp, 3)
    mix = nlp.get_pipe("crf_ner").scalar_mix_weights()
    assert len(mix["weights"]) == 3 and sum(mix["weights"]) == pytest.approx(1.0)
    layer = next(node for node in nlp.get_pipe("crf_ner").model.walk() if node.name == "lac_encoder")
    layer_again = next(node for node in again.get_pipe("crf_ner").model.walk() if node.name == "lac_encoder")
    for a, b in zip(layer.predict(make_docs(texts)), layer_again.predict(make_docs(texts))):
        numpy.testing.assert_array_equal(a, b)
    alone = [[(e.start_char, e.end_char, e.label_) for e in nlp(text).ents] for text in texts]
    assert [[e[:3] for e in doc] for doc in entities(nlp, 3)] == alone


def test_lac_fine_tuned_beside_the_defaults_inputs_trains(fake_lac_sdist, tmp_path):
    """configs/lac_context_finetune.cfg: LAC inside CharBigramEmbed.v3's concatenation gets its gradient there (its
    weights move from the sdist's), and the pipe reports the nested scalar mix."""
    from spacy_cner.pretrained.lac import open_lac
    from spacy_cner.pretrained.lac_analyzer import tagger_from_sdist

    overrides = {
        **write_corpus(tmp_path),
        "paths.lac_sdist": str(fake_lac_sdist),
        "training.max_steps": 4,
        "training.eval_frequency": 2,
        "training.max_epochs": 0,
        "initialize.before_init.missing": "none",
        "components.crf_ner.save_weights": "float32",
        "components.crf_ner.model.tok2vec.width": 16,
        "components.crf_ner.model.encoder.width": 16,
    }
    train_from_config(REPO_ROOT / "configs" / "lac_context_finetune.cfg", tmp_path / "out", overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert len(nlp.get_pipe("crf_ner").scalar_mix_weights()["weights"]) == 3
    layer = next(node for node in nlp.get_pipe("crf_ner").model.walk() if node.name == "lac_encoder")
    trained = dict(torch_module(layer).network.named_parameters())
    original = dict(tagger_from_sdist(open_lac(fake_lac_sdist)).network.named_parameters())
    for name in ("embedding.weight", "layers.0.forward_gru.state_weight", "layers.1.backward_fc.weight"):
        assert not torch.equal(trained[name], original[name]), name
    assert torch.equal(trained["crf_weights"], original["crf_weights"])
