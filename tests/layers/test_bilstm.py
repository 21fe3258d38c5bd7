"""BiLSTMEncoder: padding is invisible, gradients reach the inputs."""

import numpy
import pytest
from thinc.api import fix_random_seed

from spacy_cner.layers.bilstm import BiLSTMEncoder

WIDTH, N_I = 6, 4


@pytest.fixture
def encoder():
    fix_random_seed(0)
    model = BiLSTMEncoder(width=WIDTH, depth=2, dropout=0.0)
    model.initialize(X=[numpy.zeros((2, N_I), dtype="float32")])
    return model


def arrays(*lengths, seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.normal(size=(n, N_I)).astype("float32") for n in lengths]


def test_padding_does_not_change_outputs(encoder):
    short, long = arrays(3, 9)
    (alone,) = encoder.predict([short])
    batched = encoder.predict([long, short])
    assert batched[1].shape == (3, WIDTH)
    numpy.testing.assert_allclose(batched[1], alone, rtol=1e-5, atol=1e-6)
    # Training mode (dropout 0) too.
    (alone_train,), _ = encoder.begin_update([short])
    batched_train, _ = encoder.begin_update([short, long])
    numpy.testing.assert_allclose(batched_train[0], alone_train, rtol=1e-5, atol=1e-6)


def test_gradients_flow_to_inputs(encoder):
    short, long = arrays(3, 7)
    rng = numpy.random.default_rng(1)
    d_short = rng.normal(size=(3, WIDTH)).astype("float32")
    d_long = rng.normal(size=(7, WIDTH)).astype("float32")
    _, backprop = encoder.begin_update([short])
    (dx_alone,) = backprop([d_short])
    _, backprop = encoder.begin_update([long, short])
    dx_long, dx_short = backprop([d_long, d_short])
    assert dx_long.shape == long.shape and dx_short.shape == short.shape
    assert numpy.abs(dx_alone).min() > 0
    # The padding of the short doc takes no part in its gradient.
    numpy.testing.assert_allclose(dx_short, dx_alone, rtol=1e-4, atol=1e-6)
    # Finite differences on the loss sum(Y * dY).
    eps = 1e-2
    for t, j in [(0, 0), (1, 2), (2, 3)]:
        plus, minus = short.copy(), short.copy()
        plus[t, j] += eps
        minus[t, j] -= eps
        numeric = ((encoder.predict([plus])[0] - encoder.predict([minus])[0]) * d_short).sum() / (2 * eps)
        assert dx_alone[t, j] == pytest.approx(float(numeric), rel=1e-2, abs=1e-3)


def test_both_directions(encoder):
    """The first output sees the last token and the last output sees the first."""
    (x,) = arrays(5)
    changed_last, changed_first = x.copy(), x.copy()
    changed_last[-1] += 1.0
    changed_first[0] += 1.0
    y, y_last, y_first = (encoder.predict([a])[0] for a in (x, changed_last, changed_first))
    assert not numpy.allclose(y[0], y_last[0])
    assert not numpy.allclose(y[-1], y_first[-1])


def test_empty_inputs(encoder):
    empty = numpy.zeros((0, N_I), dtype="float32")
    (x,) = arrays(2)
    Y, backprop = encoder.begin_update([empty, x, empty])
    assert [y.shape for y in Y] == [(0, WIDTH), (2, WIDTH), (0, WIDTH)]
    dX = backprop([numpy.ones_like(y) for y in Y])
    assert [d.shape for d in dX] == [(0, N_I), (2, N_I), (0, N_I)]
    Y, backprop = encoder.begin_update([empty])
    assert [y.shape for y in Y] == [(0, WIDTH)]
    assert [d.shape for d in backprop(Y)] == [(0, N_I)]


@pytest.mark.parametrize("width", [5, 0, -2])
def test_bad_width(width):
    with pytest.raises(ValueError, match="even"):
        BiLSTMEncoder(width=width)


def test_init_needs_data_or_nI():
    with pytest.raises(ValueError, match="nI"):
        BiLSTMEncoder(width=4).initialize()
    model = BiLSTMEncoder(width=4, nI=3)
    model.initialize()
    assert model.predict([numpy.ones((2, 3), dtype="float32")])[0].shape == (2, 4)


def test_matches_torch_bidirectional_lstm(encoder):
    """Same outputs as torch's own packed bidirectional LSTM with the same weights."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from spacy_cner.layers._torch import torch_module

    module = torch_module(encoder)
    reference = torch.nn.LSTM(N_I, WIDTH // 2, num_layers=2, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for layer in range(2):
            for suffix, lstm in (("", module.forward_lstms[layer]), ("_reverse", module.backward_lstms[layer])):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(reference, f"{name}_l{layer}{suffix}").copy_(getattr(lstm, f"{name}_l0"))
    inputs = arrays(5, 2, 8, seed=3)
    ours = encoder.predict(inputs)
    padded = torch.zeros((3, 8, N_I))
    for i, x in enumerate(inputs):
        padded[i, : len(x)] = torch.from_numpy(x)
    packed = pack_padded_sequence(padded, torch.tensor([5, 2, 8]), batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        expected, _ = pad_packed_sequence(reference(packed)[0], batch_first=True)
    for i, x in enumerate(inputs):
        numpy.testing.assert_allclose(ours[i], expected[i, : len(x)].numpy(), rtol=1e-5, atol=1e-6)
