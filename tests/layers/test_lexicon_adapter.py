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
    word_mask = torch.tensor([
        [[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 0, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]],
    ], dtype=torch.bool)
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
