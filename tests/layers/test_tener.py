"""TENER: eq. 18 against a naive loop, direction awareness, padding, attention window, gold entity ids."""

import math

import numpy
import pytest
import torch
from thinc.api import fix_random_seed

from spacy_cner.layers.entity_attention import NO_ENTITY
from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.tener import (
    TENER,
    RelativeSelfAttention,
    TENEREncoder,
    relative_encoding,
)

N_HEADS, HEAD_WIDTH = 2, 4
WIDTH = N_HEADS * HEAD_WIDTH
# A small encoder without dropout: outputs that tests can compare.
SMALL = dict(n_heads=N_HEADS, head_width=HEAD_WIDTH, dropout=0.0, attention_dropout=0.0, output_dropout=0.0)


def make_attention(scale_attention=False, key_projection=False) -> RelativeSelfAttention:
    torch.manual_seed(0)
    attention = RelativeSelfAttention(N_HEADS, HEAD_WIDTH, 0.0, scale_attention, key_projection)
    return attention.eval()


def naive_encoding(offset: int, width: int) -> numpy.ndarray:
    """R_offset of TENER eq. 17, one offset at a time."""
    half = width // 2
    angles = [offset / 10000 ** (2 * i / width) for i in range(half)]
    return numpy.array([math.sin(a) for a in angles] + [math.cos(a) for a in angles])


def naive_scores(attention: RelativeSelfAttention, x: numpy.ndarray) -> numpy.ndarray:
    """Eq. 18 score by score: Q_t K_j + Q_t R_{t-j} + u K_j + v R_{t-j}; shape (heads, t, j)."""
    weights = attention.query_value.weight.detach().numpy().astype("float64")
    queries = x @ weights[:WIDTH].T
    keys = x if attention.key is None else x @ attention.key.weight.detach().numpy().T
    u = attention.u.detach().numpy()
    v = attention.v.detach().numpy()
    length = len(x)
    scores = numpy.zeros((N_HEADS, length, length))
    for h in range(N_HEADS):
        cols = slice(h * HEAD_WIDTH, (h + 1) * HEAD_WIDTH)
        for t in range(length):
            for j in range(length):
                q, k, r = queries[t, cols], keys[j, cols], naive_encoding(t - j, HEAD_WIDTH)
                score = q @ k + q @ r + u[h] @ k + v[h] @ r
                if attention.scale_attention:
                    score /= math.sqrt(HEAD_WIDTH)
                scores[h, t, j] = score
    return scores


def naive_attention(attention, x, length, bias=None, scale=None) -> numpy.ndarray:
    """Attention output of the first `length` rows of x, attending to those rows only."""
    x = x[:length].astype("float64")
    scores = naive_scores(attention, x)
    if scale is not None:
        scores = scores * scale
    if bias is not None:
        scores = scores + bias
    values = x @ attention.query_value.weight.detach().numpy().astype("float64")[WIDTH:].T
    output = numpy.zeros((length, WIDTH))
    for h in range(N_HEADS):
        cols = slice(h * HEAD_WIDTH, (h + 1) * HEAD_WIDTH)
        for t in range(length):
            weights = numpy.exp(scores[h, t] - scores[h, t].max())
            weights /= weights.sum()
            output[t, cols] = weights @ values[:, cols]
    return output


@pytest.mark.parametrize("scale_attention", [False, True])
@pytest.mark.parametrize("key_projection", [False, True])
def test_scores_match_naive_loop(scale_attention, key_projection):
    attention = make_attention(scale_attention, key_projection)
    x = numpy.random.default_rng(0).normal(size=(7, WIDTH)).astype("float32")
    scores = attention.attention_scores(torch.tensor(x)[None])[0].detach().numpy()
    numpy.testing.assert_allclose(scores, naive_scores(attention, x), rtol=1e-4, atol=1e-4)


def test_attention_is_unscaled_by_default():
    x = torch.tensor(numpy.random.default_rng(0).normal(size=(1, 5, WIDTH)).astype("float32"))
    unscaled = make_attention(scale_attention=False).attention_scores(x)
    scaled = make_attention(scale_attention=True).attention_scores(x)
    torch.testing.assert_close(scaled, unscaled / math.sqrt(HEAD_WIDTH))


def test_attention_output_matches_naive_loop_with_padding_bias_and_scale():
    attention = make_attention()
    rng = numpy.random.default_rng(1)
    lengths = [6, 3]
    x = rng.normal(size=(2, 6, WIDTH)).astype("float32")  # doc 1's padding holds garbage
    mask = torch.tensor([[i < n for i in range(6)] for n in lengths])
    bias = rng.normal(size=(2, 6, 6)).astype("float32")
    scale = rng.uniform(0.5, 2.0, size=(2, 6, 6)).astype("float32")
    output = attention(torch.tensor(x), mask, torch.tensor(bias), torch.tensor(scale)).detach().numpy()
    for i, n in enumerate(lengths):
        expected = naive_attention(attention, x[i], n, bias[i, :n, :n], scale[i, :n, :n])
        numpy.testing.assert_allclose(output[i, :n], expected, rtol=1e-4, atol=1e-5)


def test_relative_encoding_knows_direction():
    """The sine half is odd in the offset: R_k and R_-k differ, unlike |k|-only encodings."""
    length = 6
    encoding = relative_encoding(length, 8).numpy()
    for offset in range(-(length - 1), length):
        numpy.testing.assert_allclose(encoding[offset + length - 1], naive_encoding(offset, 8), atol=1e-5)
    right, left = encoding[length - 1 + 2], encoding[length - 1 - 2]
    numpy.testing.assert_allclose(right[:4], -left[:4], atol=1e-6)
    numpy.testing.assert_allclose(right[4:], left[4:], atol=1e-6)
    assert not numpy.allclose(right, left)


def test_mirrored_context_changes_scores_unlike_absolute_sinusoids():
    """ "a c b" vs "b c a": from c, the score of a depends on its side.

    With a plain sinusoidal Transformer (absolute encodings added to the input, scores
    as dot products, TENER section 3.2.1), PE_t . PE_{t+k} == PE_t . PE_{t-k}, so the
    two contexts give c the same scores (eq. 12); TENER's scores differ.
    """
    attention = make_attention()
    rng = numpy.random.default_rng(2)
    a, b, c = rng.normal(size=(3, WIDTH)).astype("float32")
    forward = numpy.stack([a, c, b])
    mirrored = numpy.stack([b, c, a])
    scores = attention.attention_scores(torch.tensor(numpy.stack([forward, mirrored])))
    from_c_to_a = scores[0, :, 1, 0], scores[1, :, 1, 2]
    assert not torch.allclose(*from_c_to_a, atol=1e-3)

    def absolute(position):
        return numpy.concatenate(
            [
                [math.sin(position / 10000 ** (2 * i / WIDTH)), math.cos(position / 10000 ** (2 * i / WIDTH))]
                for i in range(WIDTH // 2)
            ]
        )

    def plain_score(sequence, t, j):
        return (sequence[t] + absolute(t)) @ (sequence[j] + absolute(j))

    assert plain_score(forward, 1, 0) != pytest.approx(plain_score(forward, 1, 2))  # content differs
    # The position terms alone cannot tell left from right.
    assert absolute(1) @ absolute(0) == pytest.approx(absolute(1) @ absolute(2))


def test_mirrored_context_changes_the_output():
    fix_random_seed(0)
    encoder = TENEREncoder(depth=1, **SMALL)
    rng = numpy.random.default_rng(3)
    a, b, c = rng.normal(size=(3, 5)).astype("float32")
    encoder.initialize(X=[numpy.stack([a, c, b])])
    forward, mirrored = encoder.predict([numpy.stack([a, c, b]), numpy.stack([b, c, a])])
    assert not numpy.allclose(forward[1], mirrored[1], atol=1e-3)


@pytest.fixture
def encoder():
    fix_random_seed(0)
    model = TENEREncoder(depth=2, **SMALL)
    model.initialize(X=[numpy.zeros((2, 5), dtype="float32")])
    return model


def arrays(*lengths, seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.normal(size=(n, 5)).astype("float32") for n in lengths]


def test_padding_does_not_change_outputs(encoder):
    short, long = arrays(3, 9)
    (alone,) = encoder.predict([short])
    batched = encoder.predict([long, short])
    assert batched[1].shape == (3, WIDTH)
    numpy.testing.assert_allclose(batched[1], alone, rtol=1e-5, atol=1e-5)
    # Garbage in the padding of the torch module's input changes nothing either.
    module = torch_module(encoder).eval()
    padded = torch.tensor(numpy.random.default_rng(4).normal(size=(1, 9, 5)).astype("float32"))
    padded[0, :3] = torch.tensor(short)
    mask = torch.tensor([[i < 3 for i in range(9)]])
    output = module(padded, mask).detach().numpy()
    numpy.testing.assert_allclose(output[0, :3], alone, rtol=1e-5, atol=1e-5)
    assert not output[0, 3:].any()


def test_gradients_reach_inputs_and_weights(encoder):
    """A gradient that varies across the width: the encoder ends in a LayerNorm, whose input
    gradient is zero analytically for a gradient constant across the width (ones_like)."""
    X = arrays(4, 2)
    Y, backprop = encoder.begin_update(X)
    rng = numpy.random.default_rng(0)
    dX = backprop([rng.standard_normal(y.shape).astype("float32") for y in Y])
    assert [d.shape for d in dX] == [x.shape for x in X]
    assert all(numpy.abs(d).max() > 1e-3 for d in dX)
    module = torch_module(encoder)
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def window_bias(length: int, window: int) -> numpy.ndarray:
    steps = numpy.arange(length)
    far = numpy.abs(steps[:, None] - steps[None, :]) > window
    return numpy.where(far, -numpy.inf, 0.0).astype("float32")


def with_bias(model, x, bias) -> numpy.ndarray:
    """The encoder's layers over one doc with a bias added to every head's scores (the reference)."""
    module = torch_module(model).eval()
    hidden = module.input_layer(torch.tensor(x)[None])
    mask = torch.ones((1, len(x)), dtype=torch.bool)
    for layer in module.layers:
        hidden = layer(hidden, mask, torch.tensor(bias)[None], None)
    return hidden[0].detach().numpy()


def test_attention_window_blocks_far_tokens():
    """Attention limited to |t - j| <= 1 in each of 2 layers: a token reaches 2 positions away."""
    settings = dict(SMALL, depth=2)
    fix_random_seed(0)
    free = TENEREncoder(**settings)
    model = TENEREncoder(attention_window=1, **settings)
    (x,) = arrays(8)
    free.initialize(X=[x])
    model.initialize(X=[x])
    torch_module(model).load_state_dict(torch_module(free).state_dict())
    changed = x.copy()
    changed[3] += 5.0
    windowed = model.predict([x, changed])
    unreached = [0, 6, 7]
    numpy.testing.assert_allclose(windowed[0][unreached], windowed[1][unreached], rtol=1e-5, atol=1e-6)
    for position in range(1, 6):
        assert not numpy.allclose(windowed[0][position], windowed[1][position])
    unwindowed = free.predict([x, changed])
    assert not numpy.allclose(unwindowed[0][unreached], unwindowed[1][unreached])


@pytest.fixture
def enhanced():
    """An encoder with an entity-label enhancement (reads gold entity ids in training)."""
    fix_random_seed(0)
    model = TENEREncoder(depth=2, entity_attention_scale=2.0, **SMALL)
    model.initialize(X=[numpy.zeros((2, 5), dtype="float32")])
    return model


def test_gold_without_entities_changes_nothing(enhanced):
    X = arrays(4, 6)
    plain, _ = enhanced.begin_update(X)
    none = [numpy.full((len(x),), NO_ENTITY, dtype="i") for x in X]
    for a, b in zip(plain, enhanced.begin_update((X, none))[0]):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    some = [numpy.asarray([0, 0, 0, NO_ENTITY], dtype="i"), numpy.zeros((6,), dtype="i")]
    scaled, _ = enhanced.begin_update((X, some))
    assert not numpy.allclose(plain[1], scaled[1])


def test_gold_backprop_returns_the_ids(enhanced):
    X = arrays(4, 0, 6)
    ids = [numpy.zeros((len(x),), dtype="i") for x in X]
    Y, backprop = enhanced.begin_update((X, ids))
    assert [y.shape for y in Y] == [(4, WIDTH), (0, WIDTH), (6, WIDTH)]
    dX, d_ids = backprop([numpy.ones_like(y) for y in Y])
    assert d_ids == ids
    assert [d.shape for d in dX] == [x.shape for x in X]


def test_gold_shape_errors(enhanced):
    X = arrays(4, 6)
    with pytest.raises(ValueError, match="5 gold entity ids for doc 1 of 6 tokens"):
        enhanced.predict((X, [numpy.zeros((4,), "i"), numpy.zeros((5,), "i")]))
    with pytest.raises(ValueError, match="for 1 docs and an input of 2 docs"):
        enhanced.predict((X, [numpy.zeros((4,), "i")]))


@pytest.mark.parametrize("settings", [{"head_width": 5}, {"n_heads": 0}, {"depth": 0}])
def test_bad_sizes_raise(settings):
    with pytest.raises(ValueError, match="TENEREncoder"):
        TENEREncoder(**settings)


def test_bytes_round_trip_rebuilds_sizes(encoder):
    X = arrays(3, 5)
    fresh = TENEREncoder(n_heads=N_HEADS, head_width=HEAD_WIDTH, depth=2)
    assert not torch_module(fresh).is_built
    fresh.from_bytes(encoder.to_bytes())
    assert isinstance(torch_module(fresh), TENER) and torch_module(fresh).is_built
    for a, b in zip(encoder.predict(X), fresh.predict(X)):
        numpy.testing.assert_array_equal(a, b)


def test_long_docs_are_encoded_in_windows():
    """Past max_length, overlapping windows: every token has an output, gradients add up."""
    fix_random_seed(0)
    settings = dict(SMALL, depth=1)
    whole = TENEREncoder(**settings)
    windowed = TENEREncoder(max_length=16, **settings)
    long, short = arrays(50, 5)
    whole.initialize(X=[long])
    windowed.initialize(X=[long])
    windowed.from_bytes(whole.to_bytes())
    assert windowed.attrs["max_length"] == 512  # saved with the weights
    windowed.attrs["max_length"] = 16
    # A doc within max_length is encoded whole.
    numpy.testing.assert_allclose(windowed.predict([short])[0], whole.predict([short])[0], rtol=1e-6)
    out_long, out_short = windowed.predict([long, short])
    assert out_long.shape == (50, WIDTH) and (numpy.abs(out_long).sum(axis=1) > 0).all()
    # The first window is tokens 0-15 and owns the first ones: they see no token past 15.
    (first_window,) = whole.predict([long[:16]])
    numpy.testing.assert_allclose(out_long[:8], first_window[:8], rtol=1e-5, atol=1e-6)
    # Gold entity ids are cut with the windows: the first window's tokens as if encoded alone.
    windowed.attrs["entity_attention_scale"] = whole.attrs["entity_attention_scale"] = 2.0
    ids = [numpy.arange(50, dtype="i") // 4, numpy.zeros((5,), dtype="i")]
    Y, backprop = windowed.begin_update(([long, short], ids))
    (first_window,), _ = whole.begin_update(([long[:16]], [ids[0][:16]]))
    numpy.testing.assert_allclose(Y[0][:8], first_window[:8], rtol=1e-5, atol=1e-6)
    assert not numpy.allclose(Y[0][:8], out_long[:8], atol=1e-4)
    rng = numpy.random.default_rng(5)
    dX, _ = backprop([rng.normal(size=y.shape).astype("float32") for y in Y])
    assert [d.shape for d in dX] == [(50, 5), (5, 5)]
    assert (numpy.abs(dX[0]).sum(axis=1) > 0).all()


def test_attention_window_setting_equals_a_window_bias():
    """attention_window = w gives what a -inf bias beyond w gives, in training too."""
    fix_random_seed(0)
    settings = dict(SMALL, depth=2)
    free = TENEREncoder(**settings)
    windowed = TENEREncoder(attention_window=1, **settings)
    X = arrays(8, 3)
    free.initialize(X=X)
    windowed.initialize(X=X)
    torch_module(windowed).load_state_dict(torch_module(free).state_dict())
    expected = [with_bias(free, x, window_bias(len(x), 1)) for x in X]
    for a, b in zip(windowed.predict(X), expected):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    trained, _ = windowed.begin_update(X)
    for a, b in zip(trained, expected):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Saved with the weights: a fresh model rebuilt from bytes keeps the window.
    fresh = TENEREncoder(**settings)
    fresh.from_bytes(windowed.to_bytes())
    for a, b in zip(fresh.predict(X), expected):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
