"""LexiconAdapterModule: LEBERT's eqs. 4-7 against a per-character loop in plain PyTorch."""

import pytest
import torch

from spacy_cner.layers.lexicon_adapter import LexiconAdapterModule


def reference(module, hidden, words, word_mask):
    """One character at a time, as the paper writes it."""
    out = torch.zeros_like(hidden)
    for b in range(hidden.shape[0]):
        for i in range(hidden.shape[1]):
            h = hidden[b, i]
            x = words[b, i][word_mask[b, i]]
            if len(x):
                v = torch.tanh(x @ module.word_transform.weight.T + module.word_transform.bias)
                v = v @ module.word_output.weight.T + module.word_output.bias
                a = torch.softmax(h @ module.attention @ v.T, dim=0)
                z = (a[:, None] * v).sum(dim=0)
            else:
                z = torch.zeros_like(h)
            out[b, i] = torch.nn.functional.layer_norm(
                h + z, h.shape, module.norm.weight, module.norm.bias, module.norm.eps
            )
    return out


@pytest.fixture
def inputs():
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 8)
    words = torch.randn(2, 5, 3, 6)
    # Characters with 0-3 words; batch item 1 has a padded last character too.
    word_mask = torch.tensor(
        [
            [[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 0, 0]],
            [[0, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]],
        ],
        dtype=torch.bool,
    )
    return hidden, words, word_mask


def make_module():
    torch.manual_seed(1)
    module = LexiconAdapterModule(hidden_width=8, word_width=6, dropout=0.0)
    with torch.no_grad():  # non-trivial LayerNorm parameters
        module.norm.weight.uniform_(0.5, 1.5)
        module.norm.bias.uniform_(-0.5, 0.5)
    return module.eval()


def test_matches_the_per_character_reference(inputs):
    module = make_module()
    torch.testing.assert_close(module(*inputs), reference(module, *inputs), rtol=1e-5, atol=1e-5)


def test_padding_words_change_nothing(inputs):
    hidden, words, word_mask = inputs
    module = make_module()
    garbage = words.clone()
    garbage[~word_mask] = 1e3
    torch.testing.assert_close(module(hidden, garbage, word_mask), module(*inputs))


def test_characters_without_words_and_batch_of_one(inputs):
    hidden, words, word_mask = inputs
    module = make_module()
    out = module(hidden[1:], words[1:], word_mask[1:])
    assert out.shape == (1, 5, 8) and torch.isfinite(out).all()
    plain = torch.nn.functional.layer_norm(hidden[1, 0], (8,), module.norm.weight, module.norm.bias, module.norm.eps)
    torch.testing.assert_close(out[0, 0], plain)
    none = module(hidden, words, torch.zeros_like(word_mask))
    assert torch.isfinite(none).all()


def test_gradients_reach_every_parameter_and_no_nan(inputs):
    hidden, words, word_mask = inputs
    hidden = hidden.clone().requires_grad_()
    module = make_module().train()
    module(hidden, words, word_mask).sum().backward()
    assert torch.isfinite(hidden.grad).all()
    for name, param in module.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


# The thinc layer spacy-cner.LexiconAdapter.v1 (CPU use: after the character + bigram embeddings).

LEXICON_WORDS = ["北京", "北京市", "市长", "长江", "长江大桥", "大桥", "Python", "2020年"]


def adapter_model(lexicon, **options):
    import spacy
    from thinc.api import fix_random_seed

    from spacy_cner.layers.char_bigram_embed import CharBigramEmbed
    from spacy_cner.layers.lexicon_adapter import LexiconAdapter
    from spacy_cner.layers.lexicon_slot import set_lexicon

    fix_random_seed(0)
    adapter = LexiconAdapter(**{"word_width": 6, "word_rows": 50, "dropout": 0.0, **options})
    set_lexicon(adapter, lexicon)
    model = CharBigramEmbed(8, char_rows=50, bigram_rows=50, lexicon_adapter=adapter)
    nlp = spacy.blank("zh")
    model.initialize(X=[nlp.make_doc("北京市长江大桥")])
    return model, nlp


def test_layer_fuses_matched_words_only():
    from spacy_cner.layers._torch import torch_module
    from spacy_cner.lexicon import Lexicon, token_spans

    model, nlp = adapter_model(Lexicon(LEXICON_WORDS))
    embed, adapter = model.layers
    docs = [nlp.make_doc(text) for text in ["北京市长江大桥", "我", "", "用 Python 在2020年"]]
    X = embed.predict(docs)
    Y = model.predict(docs)
    assert [y.shape for y in Y] == [(len(doc), 8) for doc in docs]
    norm = torch_module(adapter).adapter.norm
    for doc, x, y in zip(docs, X, Y):
        plain = torch.nn.functional.layer_norm(torch.tensor(x), (8,), norm.weight, norm.bias, norm.eps).detach()
        matched = adapter.attrs["lexicon"].lexicon.match_spans(doc.text, token_spans(doc), 3)
        for i, words in enumerate(matched):
            # No word: LayerNorm(h) exactly; a word: something else.
            assert torch.allclose(torch.tensor(y[i]), plain[i], atol=1e-5) == (not words), (doc.text, i)
    matches = adapter.attrs["lexicon"].lexicon.match_spans(docs[3].text, token_spans(docs[3]), 3)
    assert sum(bool(words) for words in matches) > 0


def test_layer_gradients_and_batch_of_one():
    import numpy

    from spacy_cner.layers._torch import torch_module
    from spacy_cner.lexicon import Lexicon

    model, nlp = adapter_model(Lexicon(LEXICON_WORDS))
    adapter = model.get_ref("lexicon_adapter")
    docs = [nlp.make_doc("北京市长江大桥")]
    table = torch_module(adapter).table.weight
    # The table starts at zero (no word has a vector yet), so W1 gets no gradient at first.
    assert not table.detach().any()
    with torch.no_grad():
        table.normal_()  # as after some training
    Y, backprop = model.begin_update(docs)
    backprop([numpy.random.default_rng(0).normal(size=y.shape).astype("f") for y in Y])
    grads = {name: param.grad for name, param in torch_module(adapter).named_parameters()}
    assert all(grad is not None and grad.abs().sum() > 0 for grad in grads.values()), grads.keys()
    # The hashed word table: only the rows of matched words get a gradient.
    rows = adapter.attrs["lexicon"].rows(50, True)
    touched = set(numpy.flatnonzero(grads["table.weight"].abs().sum(dim=1).numpy()))
    assert touched <= set(rows.ravel().tolist()) and touched


def test_hashed_rows_are_stable_and_two_per_word():
    from spacy_cner.layers.lexicon_slot import HASHES, LexiconSlot
    from spacy_cner.lexicon import Lexicon

    rows = LexiconSlot(Lexicon(LEXICON_WORDS)).rows(1000, True)
    again = LexiconSlot(Lexicon(list(reversed(LEXICON_WORDS)))).rows(1000, True)
    assert rows.shape == (len(LEXICON_WORDS), HASHES) and (rows >= 0).all() and (rows < 1000).all()
    assert (rows == again[::-1]).all()  # a word's rows depend on the word only
    assert len({tuple(r) for r in rows.tolist()}) == len(LEXICON_WORDS)
    assert LexiconSlot(Lexicon([])).rows(1000, True).shape == (0, HASHES)


def vector_lexicon():
    import numpy

    from spacy_cner.lexicon import Lexicon

    vectors = numpy.random.default_rng(0).normal(size=(len(LEXICON_WORDS), 5)).astype("f")
    return Lexicon(LEXICON_WORDS, vectors=vectors)


def test_frozen_vectors_are_used_not_trained_and_saved_once():
    import numpy

    from spacy_cner.layers._torch import torch_module
    from spacy_cner.layers.char_bigram_embed import CharBigramEmbed
    from spacy_cner.layers.lexicon_adapter import LexiconAdapter
    from spacy_cner.layers.lexicon_slot import set_lexicon
    from spacy_cner.lexicon import Lexicon

    lexicon = vector_lexicon()
    model, nlp = adapter_model(lexicon)
    adapter = model.get_ref("lexicon_adapter")
    module = torch_module(adapter)
    assert module.table is None and module.get_input_embeddings() is None
    assert module.frozen.shape == (len(LEXICON_WORDS), 5)
    assert all(param.data_ptr() != module.frozen.data_ptr() for param in module.parameters())
    docs = [nlp.make_doc("北京市长江大桥")]
    before = model.predict(docs)[0]
    # Frozen vectors in the state dict would be saved twice; the pipe saves the lexicon (float16).
    assert all("frozen" not in key for key in module.state_dict())
    data = model.to_bytes()
    assert len(data) < lexicon.vectors.nbytes + 20_000  # not in the model's bytes
    loaded_adapter = LexiconAdapter(word_width=6, word_rows=50)
    loaded = CharBigramEmbed(8, char_rows=50, bigram_rows=50, lexicon_adapter=loaded_adapter)
    loaded.from_bytes(data)
    with pytest.raises(ValueError, match="has no lexicon"):
        loaded.predict(docs)
    set_lexicon(loaded_adapter, Lexicon.from_bytes(lexicon.to_bytes()))
    numpy.testing.assert_allclose(loaded.predict(docs)[0], before, atol=1e-3)  # float16 vectors
    # The vectors matter: other vectors, other output.
    module.frozen = module.frozen * 3
    assert not numpy.allclose(model.predict(docs)[0], before, atol=1e-3)


def test_fine_tuned_vectors_start_from_the_file_and_train():
    from spacy_cner.layers._torch import torch_module

    lexicon = vector_lexicon()
    model, nlp = adapter_model(lexicon, fine_tune_vectors=True)
    adapter = model.get_ref("lexicon_adapter")
    table = torch_module(adapter).table.weight
    torch.testing.assert_close(table.detach(), torch.from_numpy(lexicon.vectors))
    # The trained table holds the vectors: the saved lexicon keeps the words only.
    assert adapter.attrs["lexicon"].lexicon.vectors is None
    assert adapter.attrs["lexicon"].lexicon.words == LEXICON_WORDS
    assert torch_module(adapter).get_input_embeddings() is not None


def test_layer_without_a_lexicon_fails_clearly():
    from spacy_cner.layers.lexicon_adapter import LexiconAdapter

    with pytest.raises(ValueError, match=r"initialize.components.crf_ner.lexicon"):
        LexiconAdapter(nI=4).initialize()
    with pytest.raises(ValueError, match="max_words_per_char"):
        LexiconAdapter(max_words_per_char=0)


def test_empty_lexicon_changes_nothing_but_the_norm():
    from spacy_cner.layers._torch import torch_module
    from spacy_cner.lexicon import Lexicon

    model, nlp = adapter_model(Lexicon([]))
    embed, adapter = model.layers
    docs = [nlp.make_doc("北京市长江大桥")]
    norm = torch_module(adapter).adapter.norm
    plain = torch.nn.functional.layer_norm(torch.tensor(embed.predict(docs)[0]), (8,), norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(torch.tensor(model.predict(docs)[0]), plain.detach())


def test_backward_unscaled_with_a_grad_scaler():
    """Mixed precision: the transformer's scaler scales the adapter's gradients; they come back unscaled."""
    from thinc.shims.pytorch_grad_scaler import PyTorchGradScaler

    from spacy_cner.layers.lexicon_adapter import backward_unscaled

    module = torch.nn.Linear(2, 1)
    module.weight.grad = torch.ones_like(module.weight)  # from an earlier pass, already unscaled
    scaler = PyTorchGradScaler(enabled=True, init_scale=8.0)
    x = torch.ones(1, 2)

    def run_backward():
        (module(x).sum() * 8.0).backward()  # what the scaler (scale 8) does to the output gradient

    backward_unscaled(module, scaler, run_backward)
    torch.testing.assert_close(module.weight.grad, torch.full((1, 2), 2.0))
    torch.testing.assert_close(module.bias.grad, torch.ones(1))


def test_backward_unscaled_drops_overflowed_gradients():
    """An overflow in the scaled pass (fp16 at the scaler's first scales): the transformer skips
    its update, and the adapter keeps only the gradients it had before this pass."""
    from thinc.shims.pytorch_grad_scaler import PyTorchGradScaler

    from spacy_cner.layers.lexicon_adapter import backward_unscaled

    module = torch.nn.Linear(2, 1)
    module.weight.grad = torch.ones_like(module.weight)
    scaler = PyTorchGradScaler(enabled=True, init_scale=8.0)
    x = torch.tensor([[1.0, float("inf")]])

    def run_backward():
        (module(x).sum() * 8.0).backward()

    backward_unscaled(module, scaler, run_backward)
    assert scaler.found_inf
    torch.testing.assert_close(module.weight.grad, torch.ones(1, 2))
    assert module.bias.grad is None
    scaler.update()  # the scaler backs off; the next pass is finite and counts
    backward_unscaled(module, scaler, lambda: (module(torch.ones(1, 2)).sum() * 4.0).backward())
    assert not scaler.found_inf
    torch.testing.assert_close(module.weight.grad, torch.full((1, 2), 2.0))
    torch.testing.assert_close(module.bias.grad, torch.ones(1))


def test_word_dropout_hides_word_identities_in_training_only():
    from spacy_cner.layers.lexicon_adapter import LexiconAdapterNet

    torch.manual_seed(0)
    module = LexiconAdapterNet(8, 6, 20, True, dropout=0.0, word_dropout=1.0)
    with torch.no_grad():
        module.table.weight.normal_()
    hidden = torch.randn(1, 4, 8)
    rows = torch.randint(0, 20, (1, 4, 3, 2))
    mask = torch.tensor([[[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]]], dtype=torch.bool)
    hidden_words = module.train()(hidden, rows, mask)
    trained = module.eval()(hidden, rows, mask)
    with torch.no_grad():
        module.table.weight.zero_()
    unknown = module(hidden, rows, mask)
    # word_dropout 1: every word is "a word without a vector", in training only.
    torch.testing.assert_close(hidden_words, unknown)
    assert not torch.allclose(trained, unknown)
