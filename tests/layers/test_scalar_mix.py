"""ScalarMix against numpy: outputs, and gradients by finite differences."""

import numpy
import pytest

from spacy_cner.layers.scalar_mix import ScalarMix, layer_weights

N_LAYERS, WIDTH = 4, 3


def make_inputs(*lengths, seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.normal(size=(N_LAYERS, n, WIDTH)).astype("float64") for n in lengths]


def make_mix(alpha, gamma):
    model = ScalarMix()
    model.initialize(X=make_inputs(2))
    model.set_param("alpha", numpy.asarray(alpha, dtype="float64"))
    model.set_param("gamma", numpy.asarray([gamma], dtype="float64"))
    return model


def reference(X, alpha, gamma):
    weights = numpy.exp(alpha) / numpy.exp(alpha).sum()
    return [gamma * numpy.einsum("l,lnw->nw", weights, x) for x in X]


def loss(model, X, dY):
    return sum(float((y * dy).sum()) for y, dy in zip(model.predict(X), dY))


def test_starts_as_plain_average():
    X = make_inputs(3)
    model = ScalarMix()
    model.initialize(X=X)
    assert model.get_dim("nL") == N_LAYERS
    numpy.testing.assert_allclose(model.predict(X)[0], X[0].mean(axis=0), rtol=1e-6)
    mix = layer_weights(model)
    assert mix["weights"] == pytest.approx([1 / N_LAYERS] * N_LAYERS)
    assert mix["gamma"] == 1.0


def test_matches_numpy_and_finite_differences():
    alpha = numpy.array([0.3, -1.0, 2.0, 0.1])
    gamma = 1.7
    X = make_inputs(3, 0, 5)
    model = make_mix(alpha, gamma)
    Y, backprop = model.begin_update(X)
    for y, expected in zip(Y, reference(X, alpha, gamma)):
        numpy.testing.assert_allclose(y, expected, rtol=1e-10)
    rng = numpy.random.default_rng(1)
    dY = [rng.normal(size=y.shape) for y in Y]
    dX = backprop(dY)
    d_alpha, d_gamma = model.get_grad("alpha").copy(), model.get_grad("gamma").copy()
    eps = 1e-6
    for i in range(N_LAYERS):
        shifted = alpha.copy()
        shifted[i] += eps
        numeric = (loss(make_mix(shifted, gamma), X, dY) - loss(make_mix(alpha, gamma), X, dY)) / eps
        assert d_alpha[i] == pytest.approx(numeric, rel=1e-4, abs=1e-6)
    numeric = (loss(make_mix(alpha, gamma + eps), X, dY) - loss(make_mix(alpha, gamma), X, dY)) / eps
    assert d_gamma[0] == pytest.approx(numeric, rel=1e-4)
    # d loss / d X_i = gamma * w_i * dY: every layer gets a gradient.
    weights = numpy.exp(alpha) / numpy.exp(alpha).sum()
    for dx, dy in zip(dX, dY):
        numpy.testing.assert_allclose(dx, gamma * weights[:, None, None] * dy[None], rtol=1e-10)


def test_wrong_layer_count_raises():
    model = ScalarMix(n_layers=3)
    model.initialize()
    with pytest.raises(ValueError, match="initialized for 3 layers but got an input with 4"):
        model.predict(make_inputs(2))


def test_needs_data_or_size():
    with pytest.raises(ValueError, match="n_layers"):
        ScalarMix().initialize()
