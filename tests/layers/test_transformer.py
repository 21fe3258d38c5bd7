"""TransformerTok2Vec with tiny local BERT and NEZHA models: gradients reach every fused layer."""

import numpy
import pytest
import spacy
import torch
from thinc.api import fix_random_seed

from spacy_cner.layers.transformer import TransformerTok2Vec

TEXTS = ["我在北京市工作。张三去了上海！", "", "李四 ab 12", "中国人民银行"]


@pytest.fixture(params=["bert", "nezha"])
def model_path(request, tiny_bert, tiny_nezha):
    return {"bert": tiny_bert, "nezha": tiny_nezha}[request.param]


@pytest.fixture(params=["bert", "nezha", "roberta"])
def any_model_path(request):
    """Also RoBERTa's byte-level BPE: 3 wordpieces per Chinese character."""
    return request.getfixturevalue(f"tiny_{request.param}")


def make_docs(texts=TEXTS):
    nlp = spacy.blank("zh")
    return [nlp.make_doc(text) for text in texts]


def make_tok2vec(path, **settings):
    fix_random_seed(0)
    model = TransformerTok2Vec(str(path), **settings)
    model.initialize(X=make_docs())
    return model


def hf_model(model):
    return model.get_ref("transformer").shims[0]._model


def test_shapes_empty_docs_and_whitespace(any_model_path):
    model = make_tok2vec(any_model_path)
    docs = make_docs()
    Y = model.predict(docs)
    assert [y.shape for y in Y] == [(len(doc), 32) for doc in docs]
    for doc, y in zip(docs, Y):
        for token, row in zip(doc, y):
            # Whitespace has no wordpieces and gets zeros; every other token a vector.
            assert bool(numpy.abs(row).sum() > 0) == (not token.is_space), (doc.text, token.text)


def reference_tokens(model, text, alpha, gamma):
    """The same computation in plain PyTorch: mix of all hidden states, one wordpiece per character."""
    tokenizer = model.get_ref("transformer").shims[0]._hfmodel.tokenizer
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    output = hf_model(model)(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    weights = torch.softmax(alpha, dim=0)
    mixed = gamma * sum(w * h for w, h in zip(weights, output.hidden_states))
    return mixed[0, 1 : 1 + len(text)]  # drop [CLS] and [SEP]


def test_gradients_match_pytorch_reference_and_reach_the_embeddings(model_path):
    """All mix weight on layer 1: the embedding matrix still gets its gradient, as in PyTorch."""
    model = make_tok2vec(model_path)
    mix = model.get_ref("scalar_mix")
    alpha = numpy.asarray([-30.0, 30.0, -30.0], dtype="float32")
    mix.set_param("alpha", alpha)
    mix.set_param("gamma", numpy.asarray([1.5], dtype="float32"))
    text = "我在北京市工作"
    (y,), backprop = model.begin_update(make_docs([text]))
    dy = numpy.random.default_rng(0).normal(size=y.shape).astype("float32")
    hf_model(model).zero_grad()
    backprop([dy])
    embeddings = hf_model(model).embeddings.word_embeddings.weight
    ours = embeddings.grad.clone()
    assert ours.abs().sum() > 0
    ours_alpha = mix.get_grad("alpha").copy()

    hf_model(model).zero_grad()
    alpha_torch = torch.tensor(alpha, requires_grad=True)
    expected = reference_tokens(model, text, alpha_torch, torch.tensor(1.5))
    numpy.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    (expected * torch.tensor(dy)).sum().backward()
    torch.testing.assert_close(ours, embeddings.grad, rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(ours_alpha, alpha_torch.grad.numpy(), rtol=1e-3, atol=1e-6)


def test_every_layer_is_fine_tuned(tiny_bert):
    """Each transformer layer's weights get a gradient from the mix's loss."""
    model = make_tok2vec(tiny_bert)
    Y, backprop = model.begin_update(make_docs())
    hf_model(model).zero_grad()
    # Not ones_like: each hidden state ends in a LayerNorm, which maps a gradient constant
    # across the width to a zero input gradient (the test would pass on rounding noise).
    rng = numpy.random.default_rng(0)
    backprop([rng.standard_normal(y.shape).astype("float32") for y in Y])
    for layer in hf_model(model).encoder.layer:
        assert layer.attention.self.query.weight.grad.abs().max() > 1e-4


def test_last_layer_without_scalar_mix(tiny_bert):
    model = make_tok2vec(tiny_bert, scalar_mix=False)
    assert not model.has_ref("scalar_mix")
    text = "张三去了上海"
    (y,) = model.predict(make_docs([text]))
    tokenizer = model.get_ref("transformer").shims[0]._hfmodel.tokenizer
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    expected = hf_model(model)(input_ids=ids).last_hidden_state[0, 1:-1]
    numpy.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_windows_cut_at_sentence_ends(tiny_bert):
    """Two sentences that do not fit one window are encoded as if each were alone."""
    first, second = "我在北京市工作。", "张三去了上海！"
    model = make_tok2vec(tiny_bert, window_size=12)  # 10 wordpieces + [CLS], [SEP]
    (together,) = model.predict(make_docs([first + second]))
    alone = model.predict(make_docs([first, second]))
    numpy.testing.assert_allclose(together, numpy.concatenate(alone), rtol=1e-5, atol=1e-6)


def test_long_doc_every_token_in_bounded_batches(tiny_bert):
    """20,000 characters with a 64-wordpiece model: every token gets a vector; the
    transformer never sees more than max_batch_windows windows per call at prediction."""
    model = make_tok2vec(tiny_bert, max_batch_windows=8)
    sentence = "中国人民银行在北京市工作。"
    # Sentences, then one unpunctuated run longer than a window.
    text = sentence * 1500 + "张三去了上海" * 100
    assert len(text) == 20100
    batch_sizes = []
    hook = hf_model(model).register_forward_pre_hook(
        lambda module, args, kwargs: batch_sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    (y,) = model.predict(make_docs([text]))
    hook.remove()
    assert y.shape == (len(text), 32)
    assert numpy.isfinite(y).all() and (numpy.abs(y).sum(axis=1) > 0).all()
    assert max(batch_sizes) <= 8 and sum(batch_sizes) > 300


def test_bytes_round_trip_needs_no_model_files(any_model_path, tmp_path):
    model = make_tok2vec(any_model_path)
    docs = make_docs()
    expected = model.predict(docs)
    fresh = TransformerTok2Vec(str(tmp_path / "not-there"))
    fresh.from_bytes(model.to_bytes())
    # spacy-transformers' from_bytes rebuilds the model from its saved config, which
    # selects the eager attention kernel where from_pretrained chose sdpa: equal up to rounding.
    for a, b in zip(expected, fresh.predict(docs)):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_window_size_too_small_raises(tiny_bert):
    model = make_tok2vec(tiny_bert, window_size=3)
    with pytest.raises(ValueError, match="window_size of at least 4"):
        model.predict(make_docs())


def test_token_is_the_mean_of_its_wordpieces(tiny_roberta):
    """With byte-level BPE each character is 3 wordpieces; its vector is their mean."""
    model = make_tok2vec(tiny_roberta, scalar_mix=False)
    text = "北京市"
    (y,) = model.predict(make_docs([text]))
    tokenizer = model.get_ref("transformer").shims[0]._hfmodel.tokenizer
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    assert ids.shape[1] == 2 + 3 * len(text)
    hidden = hf_model(model)(input_ids=ids).last_hidden_state[0, 1:-1].detach().numpy()
    expected = hidden.reshape(len(text), 3, -1).mean(axis=1)
    numpy.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["bert", "nezha"])
def test_attention_window_blocks_far_tokens(kind, request):
    """attention_window = 1 in a 2-layer model: a change reaches 2 tokens away, no further."""
    model = make_tok2vec(request.getfixturevalue(f"tiny_{kind}"), attention_window=1)
    text = "我在北京市工作张三去了上海"
    changed = text[:8] + "李" + text[9:]  # token 8 differs
    (a,), (b,) = model.predict(make_docs([text])), model.predict(make_docs([changed]))
    far = [0, 1, 2, 3, 4, 5, 11, 12]
    numpy.testing.assert_allclose(a[far], b[far], rtol=1e-5, atol=1e-6)
    assert not numpy.allclose(a[6:11], b[6:11])
    free = make_tok2vec(request.getfixturevalue(f"tiny_{kind}"))
    (c,), (d,) = free.predict(make_docs([text])), free.predict(make_docs([changed]))
    assert not numpy.allclose(c[far], d[far])


def test_import_spacy_cner_leaves_transformers_unimported():
    """A character BiLSTM pipeline never needs transformers (seconds to import): neither `import spacy_cner` nor
    looking up the transformer layer's registered name (every entry point of the registry, as `spacy package`
    does) imports it; calling the layer does."""
    import subprocess
    import sys

    code = (
        "import sys, spacy_cner\n"
        "print([m for m in ('transformers', 'spacy_transformers') if m in sys.modules])\n"
        "from spacy.util import registry\n"
        "layer = registry.architectures.get('spacy-cner.TransformerTok2Vec.v1')\n"
        "registry.architectures.get_all()\n"
        "print(layer is spacy_cner.TransformerTok2Vec, 'spacy_cner.layers.transformer.model' in sys.modules)\n"
        "layer('unused')\n"
        "print('spacy_transformers' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-3:] == ["[]", "True False", "True"]


def test_transformer_configs_without_spacy_transformers_say_what_to_install(tmp_path):
    """spacy-transformers is an extra (spaCy imports an installed plugin's factories at every spacy.load):
    without it, every registry's entry points load (catalogue loads all of them when a name misses, as in
    `spacy package`), and the transformer layer raises an ImportError naming the extra to install only when
    called, directly or from a config; the character configs' layers still resolve."""
    import subprocess
    import sys

    from conftest import REPO_ROOT
    from no_transformers import env_without_transformers

    code = (
        "import spacy\n"
        "from spacy.util import registry\n"
        "for name in registry.get_registry_names():\n"
        "    getattr(registry, name).get_all()\n"
        "print(registry.architectures.get('spacy-cner.CharBigramEmbed.v1').__name__)\n"
        "layer = registry.architectures.get('spacy-cner.TransformerTok2Vec.v1')\n"
        "tok2vec = {'@architectures': 'spacy-cner.TransformerTok2Vec.v1', 'name': 'bert-base-chinese'}\n"
        "for build in (lambda: layer('bert-base-chinese'),\n"
        "              lambda: spacy.blank('zh').add_pipe('crf_ner', config={'model': {'tok2vec': tok2vec}})):\n"
        "    try:\n"
        "        build()\n"
        "    except ImportError as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    env = env_without_transformers(tmp_path / "site")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-3] == "CharBigramEmbed"
    for line in lines[-2:]:
        assert line.startswith("ImportError spacy-cner.TransformerTok2Vec.v1 (the transformer configs) needs")
        assert "spacy-cner[transformers]" in line


def reference_plan(doc, tokenizer, max_length, every_sentence):
    """A doc's wordpieces, their tokens and windows, computed per character and token in plain Python."""
    from spacy_cner.long_docs import ends_sentence, split_windows

    if not doc.text:
        return [], [], [], [0] * len(doc), []
    encoding = tokenizer(doc.text, add_special_tokens=False, return_offsets_mapping=True)
    char_token = [-1] * len(doc.text)
    for token in doc:
        char_token[token.idx : token.idx + len(token.text)] = [token.i] * len(token.text)
    token_wordpieces, wordpiece_tokens = [[] for _ in doc], []
    for j, (start, end) in enumerate(encoding["offset_mapping"]):
        overlapped = sorted({t for t in char_token[start:end] if t >= 0})
        for t in overlapped:
            token_wordpieces[t].append(j)
        wordpiece_tokens.append(overlapped[0] if overlapped else (wordpiece_tokens[-1] if wordpiece_tokens else 0))
    starts = [start for start, _ in encoding["offset_mapping"]]
    ends = [int(numpy.searchsorted(starts, t.idx + len(t.text))) for t in doc if ends_sentence(t.text)]
    windows = split_windows(ends, len(starts), max_length, every_sentence)
    flat = [j for wordpieces in token_wordpieces for j in wordpieces]
    return list(encoding["input_ids"]), windows, flat, [len(w) for w in token_wordpieces], wordpiece_tokens


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_batch_of_plans_equals_the_alignment_doc_by_doc(any_model_path, lang):
    """One tokenizer call and array operations for the batch give each doc the alignment and windows of a
    per-character reference: wordpieces over several characters (RoBERTa's 3 per character, "ab" and
    "##b") and several tokens (English words split into wordpieces), whitespace, newlines, empty docs."""
    from transformers import AutoTokenizer

    from spacy_cner.layers.transformer.wordpieces import plan_docs

    tokenizer = AutoTokenizer.from_pretrained(str(any_model_path))
    texts = TEXTS + [" ", "  李四 ab 12 ", "我。\n", "\n", "我在北京市工作。张三去了上海！" * 4, "abab ab1 12\t\n我"]
    docs = [spacy.blank(lang).make_doc(text) for text in texts]
    for max_length, every_sentence in ((10, False), (62, False), (62, True)):
        plans = plan_docs(docs, tokenizer, max_length, every_sentence=every_sentence)
        for doc, plan in zip(docs, plans):
            ids, windows, flat, lengths, wordpiece_tokens = reference_plan(doc, tokenizer, max_length, every_sentence)
            assert plan.input_ids.tolist() == ids and plan.windows == windows, doc.text
            assert plan.token_wordpieces.tolist() == flat and plan.token_lengths.tolist() == lengths, doc.text
            assert plan.wordpiece_tokens.tolist() == wordpiece_tokens, doc.text


def test_window_batch_puts_the_special_tokens_where_the_tokenizer_does(any_model_path):
    from transformers import AutoTokenizer

    from spacy_cner.layers.transformer.batch import window_batch
    from spacy_cner.layers.transformer.wordpieces import plan_docs

    tokenizer = AutoTokenizer.from_pretrained(str(any_model_path))
    plans = plan_docs(make_docs(["我在北京市工作", "张三", "ab 12 中国人民银行"]), tokenizer, 60)
    batch = window_batch(tokenizer, [(plan, plan.windows[0]) for plan in plans], 1)
    for row, mask, plan in zip(batch["input_ids"], batch["attention_mask"], plans):
        expected = tokenizer.build_inputs_with_special_tokens(plan.input_ids.tolist())
        assert row[: len(expected)].tolist() == expected and mask.tolist() == [1] * len(expected) + [0] * (
            len(row) - len(expected)
        )
        assert (row[len(expected) :] == tokenizer.pad_token_id).all()


def test_windows_of_different_lengths_go_to_different_calls_with_the_same_vectors(tiny_bert):
    """At prediction a long window does not pad short ones: the transformer gets the short windows in one
    call and the long one in another, and every doc's vectors are those it gets alone."""
    model = make_tok2vec(tiny_bert)
    texts = ["张三", "李四在", "我在北京市工作。张三去了上海！中国人民银行在北京市工作。张三去了上海", "王五"]
    shapes = []
    hook = hf_model(model).register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    together = model.predict(make_docs(texts))
    assert sorted(shapes) == [(1, len(texts[2]) + 2), (3, 5)]
    shapes.clear()
    alone = [model.predict(make_docs([text]))[0] for text in texts]
    hook.remove()
    for a, b in zip(together, alone):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_loaded_transformer_attends_with_the_kernel_from_pretrained_chose(tiny_bert, tmp_path):
    """A BERT saved and loaded runs scaled-dot-product attention as it did before it was saved (not eager
    attention); a kernel asked for in transformer_config is kept."""
    for path, settings, expected in (
        (tiny_bert, {}, "sdpa"),
        (tiny_bert, {"transformer_config": {"attn_implementation": "eager"}}, "eager"),
    ):
        model = make_tok2vec(path, **settings)
        assert hf_model(model).config._attn_implementation == expected
        fresh = TransformerTok2Vec(str(tmp_path / "not-there"), **settings)
        fresh.from_bytes(model.to_bytes())
        assert hf_model(fresh).config._attn_implementation == expected
