"""_torch.Dropout: torch's dropout distribution with a numpy mask on the CPU, reproducible."""

import pytest
import torch

from spacy_cner.layers._torch import Dropout


@pytest.mark.parametrize("p", [0.5, 0.3, 0.1])
def test_keeps_one_minus_p_of_the_elements_scaled(p):
    dropout = Dropout(p).train()
    x = torch.rand(200, 50, 100) + 0.5  # no zeros: every dropped element shows
    y = dropout(x)
    kept = y != 0
    # 1M elements: the share kept is within 0.003 of 1 - p (over 6 standard deviations).
    assert abs(kept.double().mean().item() - (1 - p)) < 3e-3
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))


def test_gradient_is_the_mask():
    dropout = Dropout(0.5).train()
    x = torch.rand(40, 30, requires_grad=True)
    y = dropout(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y != 0).float() * 2.0)


def test_reproducible_from_torch_seed_and_fresh_each_call():
    dropout = Dropout(0.5).train()
    x = torch.ones(64, 64)
    torch.manual_seed(3)
    first, second = dropout(x), dropout(x)
    torch.manual_seed(3)
    assert torch.equal(dropout(x), first)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_eval_mode_and_p_of_0_or_1_are_torch_dropout(p):
    x = torch.rand(8, 8) + 0.5
    assert torch.equal(Dropout(0.5).eval()(x), x)
    torch.manual_seed(0)
    expected = torch.nn.Dropout(p).train()(x)
    torch.manual_seed(0)
    assert torch.equal(Dropout(p).train()(x), expected)
