"""Entity-label attention enhancement (cl): gold entities sharpen attention in training, never in prediction."""

import math

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from spacy.util import load_config
from thinc.api import Model, chain, fix_random_seed, noop

from spacy_cner.architectures import build_crf_tagger
from spacy_cner.layers.entity_attention import (
    NO_ENTITY,
    ScaleAttentionScores,
    entity_scale,
    example_entity_ids,
    wordpiece_entity_scale,
)
from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.tener import TENEREncoder
from spacy_cner.layers.transformer.batch import window_batch
from spacy_cner.layers.transformer.wordpieces import plan_doc

from conftest import REPO_ROOT, TENER_NO_DROPOUT, TRAIN_DATA, make_examples


def test_example_entity_ids():
    nlp = spacy.blank("zh")
    # Adjacent entities, a one-token entity, and a token with missing annotation ("-").
    doc = nlp.make_doc("张三李四去了京")
    example = Example.from_dict(doc, {"entities": ["B-PER", "L-PER", "B-PER", "L-PER", "-", "O", "U-LOC"]})
    assert example_entity_ids(example).tolist() == [0, 0, 1, 1, NO_ENTITY, NO_ENTITY, 2]


def test_entity_scale_is_beta_w_plus_j():
    ids = numpy.asarray([0, 0, NO_ENTITY, 1, 1, 1], dtype="i")
    scale = entity_scale(ids, 2.0)
    expected = numpy.ones((6, 6), dtype="float32")
    expected[0:2, 0:2] = 3.0
    expected[3:6, 3:6] = 3.0
    numpy.testing.assert_array_equal(scale, expected)


# TENER: the scale multiplies the scores of every head (tested against the naive loop in layers/test_tener.py).


def tener(beta):
    fix_random_seed(0)
    model = TENEREncoder(
        n_heads=2,
        head_width=8,
        depth=2,
        dropout=0.0,
        attention_dropout=0.0,
        output_dropout=0.0,
        entity_attention_scale=beta,
    )
    model.initialize(X=[numpy.zeros((2, 5), dtype="float32")])
    return model


def with_scale(model, x, scale):
    """The encoder's torch module over one doc with its attention scores multiplied by scale."""
    module = torch_module(model).eval()
    mask = torch.ones((1, len(x)), dtype=torch.bool)
    return module(torch.tensor(x)[None], mask, torch.tensor(scale)[None])[0].detach().numpy()


def test_tener_scales_scores_in_training_only():
    rng = numpy.random.default_rng(0)
    X = [rng.normal(size=(n, 5)).astype("float32") for n in (6, 4)]
    ids = [numpy.asarray([0, 0, -1, 1, 1, 1], dtype="i"), numpy.asarray([-1, 0, 0, -1], dtype="i")]
    enhanced, plain = tener(2.0), tener(0.0)
    # Prediction ignores gold entities.
    for a, b in zip(enhanced.predict((X, ids)), plain.predict(X)):
        numpy.testing.assert_array_equal(a, b)
    # Training without gold entities (a forward pass outside crf_ner's update): no change.
    for a, b in zip(enhanced.begin_update(X)[0], plain.begin_update(X)[0]):
        numpy.testing.assert_allclose(a, b, rtol=1e-6)
    trained, _ = enhanced.begin_update((X, ids))
    untouched, _ = plain.begin_update((X, ids))
    for x, i, a, b in zip(X, ids, trained, untouched):
        numpy.testing.assert_allclose(a, with_scale(plain, x, entity_scale(i, 2.0)), rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(
            b, with_scale(plain, x, numpy.ones((len(x), len(x)), "float32")), rtol=1e-5, atol=1e-6
        )
    assert not numpy.allclose(trained[0], untouched[0], atol=1e-4)


def tagger(beta, sentence_encoding=False):
    fix_random_seed(0)
    tok2vec = spacy.util.registry.resolve(
        {"t": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16, "dropout": 0.0, "bigram_dropout": 0.0}}
    )["t"]
    encoder = TENEREncoder(
        n_heads=2,
        head_width=8,
        depth=1,
        dropout=0.0,
        attention_dropout=0.0,
        output_dropout=0.0,
        entity_attention_scale=beta,
    )
    model = build_crf_tagger(tok2vec, encoder, sentence_encoding=sentence_encoding)
    docs = [example.predicted for example in make_examples(spacy.blank("zh"), TRAIN_DATA[:3])]
    model.initialize(X=docs, Y=["O", "B-PER", "I-PER"])
    return model, docs


@pytest.mark.parametrize("sentence_encoding", [False, True])
def test_tagger_hands_gold_to_its_encoder(sentence_encoding):
    """(docs, ids) in training: the enhanced encoder reads them (per sentence too); otherwise nothing changes."""
    model, docs = tagger(2.0, sentence_encoding)
    docs[1] = spacy.blank("zh").make_doc("张三去了。上海很大")  # two sentences
    ids = [numpy.zeros((len(doc),), dtype="i") for doc in docs]
    plain, _ = model.begin_update(docs)
    with_gold, backprop = model.begin_update((docs, ids))
    assert all(not numpy.allclose(a, b, atol=1e-5) for a, b in zip(plain, with_gold))
    assert backprop([numpy.ones_like(y) for y in with_gold]) == (docs, ids)
    for a, b in zip(model.predict((docs, ids)), model.predict(docs)):
        numpy.testing.assert_array_equal(a, b)
    unenhanced, _ = tagger(0.0, sentence_encoding)
    for a, b in zip(unenhanced.begin_update(docs)[0], unenhanced.begin_update((docs, ids))[0]):
        numpy.testing.assert_allclose(a, b, rtol=1e-6)


def test_tagger_refuses_an_enhanced_layer_it_cannot_reach():
    tok2vec = spacy.util.registry.resolve({"t": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16}})["t"]
    with pytest.raises(ValueError, match="hands gold entities to its tok2vec itself, not to the tener"):
        build_crf_tagger(chain(tok2vec, TENEREncoder(entity_attention_scale=1.0)))


@pytest.mark.parametrize("sentence_encoding", [False, True])
def test_tagger_cuts_the_gold_ids_as_it_cuts_the_sentences(monkeypatch, sentence_encoding):
    """With sentence_encoding each sentence's encoder pass gets that sentence's ids (an entity
    across the sentence end included); without it, the doc's."""
    import spacy_cner.layers.tener as tener_module

    seen = []
    original = tener_module.entity_scale
    monkeypatch.setattr(
        tener_module, "entity_scale", lambda ids, beta: seen.append(ids.tolist()) or original(ids, beta)
    )
    model, _ = tagger(2.0, sentence_encoding)
    doc = spacy.blank("zh").make_doc("张三去了。上海很大")  # the sentence ends after "。"
    ids = numpy.asarray([0, 0, -1, 1, 1, 1, 2, 2, -1], dtype="i")
    model.begin_update(([doc], [ids]))
    if sentence_encoding:
        assert seen == [[0, 0, -1, 1, 1], [1, 2, 2, -1]]
    else:
        assert seen == [ids.tolist()]


def test_pipe_refuses_an_enhanced_layer_moved_out_of_reach():
    """A model rewired after it was built (as replace_listeners does) must not train an enhanced
    layer without its gold entities."""
    nlp, examples, optimizer = tener_pipeline(3.0)
    model = nlp.get_pipe("crf_ner").model
    encoder = model.get_ref("encoder")
    emitter = model.layers[0]
    wrapped = chain(encoder, noop())
    emitter.layers[emitter.layers.index(encoder)] = wrapped
    model.set_ref("encoder", wrapped)
    with pytest.raises(ValueError, match="inside its tok2vec or encoder"):
        nlp.update(examples, sgd=optimizer)


def test_pipe_refuses_an_enhanced_layer_in_another_architecture():
    from spacy_cner.layers.crf import CRF
    from spacy_cner.pipeline.checks import uses_gold_entities

    tok2vec = spacy.util.registry.resolve({"t": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16}})["t"]
    crf = CRF()
    model = Model(
        "my_tagger",
        lambda model, X, is_train: (X, lambda dY: dY),
        layers=[chain(tok2vec, TENEREncoder(entity_attention_scale=1.0)), crf],
        refs={"crf": crf},
    )
    with pytest.raises(ValueError, match="in a 'my_tagger' model: only spacy-cner.CRFTagger.v1"):
        uses_gold_entities(model, "crf_ner")


def test_negative_beta_raises():
    with pytest.raises(ValueError, match="entity_attention_scale must be >= 0"):
        TENEREncoder(entity_attention_scale=-1.0)


# Hugging Face encoders: the input of each attention softmax is scaled.


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_scaled_bert_attention_matches_reference(tiny_bert, implementation):
    from transformers import BertModel

    model = BertModel.from_pretrained(str(tiny_bert), attn_implementation=implementation).eval()
    ids = torch.tensor([[2, 10, 11, 12, 13, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    entity_ids = numpy.asarray([-1, 0, 0, -1, 1, -1, -1], dtype="i")
    scale = torch.tensor(entity_scale(entity_ids, 2.0))[None, None]
    with ScaleAttentionScores(scale) as mode:
        output = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    assert mode.n_scaled == model.config.num_hidden_layers
    attention = model.encoder.layer[0].attention.self
    hidden = output.hidden_states[0]

    def heads(x):
        return x.view(1, 7, attention.num_attention_heads, attention.attention_head_size).transpose(1, 2)

    scores = heads(attention.query(hidden)) @ heads(attention.key(hidden)).transpose(-1, -2)
    scores = scores / math.sqrt(attention.attention_head_size)
    blocked = torch.finfo(torch.float32).min * (1 - mask[:, None, None, :].float())
    expected = torch.softmax(scores * scale + blocked, dim=-1)
    torch.testing.assert_close(output.attentions[0], expected, rtol=1e-5, atol=1e-6)
    plain = model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions[0]
    assert not torch.allclose(plain, expected, atol=1e-4)


def test_wordpiece_scale_follows_tokens(tiny_roberta):
    """RoBERTa's 3 wordpieces per character: all wordpieces of an entity's characters share the scale."""
    from spacy_cner.layers.transformer import TransformerTok2Vec

    model = TransformerTok2Vec(str(tiny_roberta), window_size=64)
    doc = spacy.blank("zh").make_doc("张三去了")
    model.initialize(X=[doc])
    tokenizer = model.get_ref("transformer").shims[0]._hfmodel.tokenizer
    plan = plan_doc(doc, tokenizer, 60)
    items = [(plan, plan.windows[0])]
    batch = window_batch(tokenizer, items, 1)
    window = plan.windows[0]
    scale = wordpiece_entity_scale(
        [plan.wordpiece_tokens[window.start : window.end]],
        [numpy.asarray([0, 0, -1, -1], dtype="i")],
        batch["input_ids"].shape[1],
        1,
        2.0,
    )
    assert scale.shape == (1, 14, 14)  # <s>, 4 x 3 wordpieces, </s>
    expected = numpy.ones((14, 14), dtype="float32")
    expected[1:7, 1:7] = 3.0
    numpy.testing.assert_array_equal(scale[0], expected)


def transformer_pipeline(path, beta, window=None):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    tok2vec = {
        "@architectures": "spacy-cner.TransformerTok2Vec.v1",
        "name": str(path),
        "entity_attention_scale": beta,
        "attention_window": window,
    }
    nlp.add_pipe(
        "crf_ner", config={"model": {"@architectures": "spacy-cner.CRFTagger.v1", "encoder": None, "tok2vec": tok2vec}}
    )
    examples = make_examples(nlp, TRAIN_DATA[:3])
    optimizer = nlp.initialize(lambda: examples)
    return nlp, examples, optimizer


def tener_pipeline(beta):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    # No dropout anywhere: the two pipelines' training steps must be comparable.
    overrides = {
        "components.crf_ner.model.encoder.entity_attention_scale": beta,
        "components.crf_ner.model.encoder.n_heads": 2,
        "components.crf_ner.model.encoder.head_width": 8,
        **TENER_NO_DROPOUT,
    }
    model = load_config(REPO_ROOT / "configs" / "tener.cfg", overrides=overrides)["components"]["crf_ner"]["model"]
    nlp.add_pipe("crf_ner", config={"model": dict(model)})
    examples = make_examples(nlp, TRAIN_DATA[:3])
    optimizer = nlp.initialize(lambda: examples)
    return nlp, examples, optimizer


def parameters(nlp):
    return numpy.concatenate(
        [
            nlp.get_pipe("crf_ner").model.ops.to_numpy(node.get_param(name)).ravel()
            for node in nlp.get_pipe("crf_ner").model.walk()
            for name in node.param_names
            if node.has_param(name)
        ]
        + [
            p.detach().numpy().ravel()
            for node in nlp.get_pipe("crf_ner").model.walk()
            for shim in node.shims
            for p in shim._model.parameters()
        ]
    )


@pytest.mark.parametrize("kind", ["tener", "bert", "nezha"])
def test_cl_changes_training_only(kind, request):
    """Same weights: identical predictions; one identical update step: different weights."""
    if kind == "tener":
        (enhanced, examples, sgd_a), (plain, _, sgd_b) = tener_pipeline(3.0), tener_pipeline(0.0)
    else:
        path = request.getfixturevalue(f"tiny_{kind}")
        (enhanced, examples, sgd_a), (plain, _, sgd_b) = (
            transformer_pipeline(path, 3.0),
            transformer_pipeline(path, 0.0),
        )
    texts = [text for text, _ in TRAIN_DATA[:3]]
    numpy.testing.assert_array_equal(parameters(enhanced), parameters(plain))
    a = [enhanced.get_pipe("crf_ner").model.predict([enhanced.make_doc(t)])[0] for t in texts]
    b = [plain.get_pipe("crf_ner").model.predict([plain.make_doc(t)])[0] for t in texts]
    for x, y in zip(a, b):
        numpy.testing.assert_array_equal(x, y)
    losses_a, losses_b = {}, {}
    enhanced.update(examples, sgd=sgd_a, drop=0.0, losses=losses_a)
    plain.update(make_examples(plain, TRAIN_DATA[:3]), sgd=sgd_b, drop=0.0, losses=losses_b)
    assert losses_a["crf_ner"] != pytest.approx(losses_b["crf_ner"], rel=1e-6)
    assert not numpy.allclose(parameters(enhanced), parameters(plain), rtol=0, atol=1e-7)


def test_cl_with_attention_window_and_fgm(tiny_nezha, monkeypatch):
    """cl, cs and adversarial training together: the update runs and both passes see the gold."""
    import spacy_cner.layers.transformer.model as model_module

    scaled = []
    original = model_module.wordpiece_entity_scale
    monkeypatch.setattr(model_module, "wordpiece_entity_scale", lambda *args: scaled.append(1) or original(*args))
    nlp, examples, optimizer = transformer_pipeline(tiny_nezha, 2.0, window=2)
    ner = nlp.get_pipe("crf_ner")
    ner.adversarial = spacy.util.registry.resolve({"a": {"@misc": "spacy-cner.fgm.v1"}})["a"]
    losses = {}
    for _ in range(3):
        nlp.update(examples, sgd=optimizer, drop=0.0, losses=losses)
    assert losses["crf_ner"] > 0 and losses["crf_ner_adversarial"] > 0
    assert len(scaled) == 6  # per update: the plain pass and the adversarial one
