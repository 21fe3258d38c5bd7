"""Scalar mix: a trained weighted sum of an encoder's layers (Peters et al. 2018).

The NEZHA-BiLSTM-CRF paper's dynamic fusion (eqs. 11-12): the L + 1 hidden states
of a transformer (embedding output included) are summed with softmax-normalised
trained weights and scaled by a trained gamma, h = gamma * sum_i softmax(alpha)_i h_i.
"""

from typing import Callable, Dict, List, Optional, Tuple

from thinc.api import Model, registry
from thinc.types import Floats1d, Floats2d, Floats3d

InT = List[Floats3d]
OutT = List[Floats2d]


@registry.layers("spacy-cner.ScalarMix.v1")
def ScalarMix(n_layers: Optional[int] = None) -> Model[InT, OutT]:
    """Mix stacked layer outputs with trained softmax weights times gamma.

    Each input item is one (n_layers, n_tokens, width) array: the layers of one
    doc stacked. The weights start uniform and gamma at 1 (a plain average).

    n_layers (Optional[int]): Number of mixed layers; None infers it at initialize.
    RETURNS (Model[List[Floats3d], List[Floats2d]]): The mix.
    """
    return Model(
        "scalar_mix",
        forward,
        init=init,
        params={"alpha": None, "gamma": None},
        dims={"nL": n_layers},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """h = gamma * sum_i softmax(alpha)_i X_i for every item."""
    weights = _softmax(model, model.get_param("alpha"))
    gamma = model.get_param("gamma")[0]
    for x in X:
        if x.shape[0] != weights.shape[0]:
            raise ValueError(
                f"ScalarMix was initialized for {weights.shape[0]} layers but got an input "
                f"with {x.shape[0]}; inputs are (n_layers, n_tokens, width) arrays."
            )
    # shape: (n_tokens, width) per item, before gamma
    averages = [(x * weights[:, None, None]).sum(axis=0) for x in X]
    Y = [gamma * average for average in averages]

    def backprop(dY: OutT) -> InT:
        d_weights = model.ops.alloc1f(weights.shape[0])
        d_gamma = 0.0
        dX = []
        for x, average, dy in zip(X, averages, dY):
            dX.append(gamma * weights[:, None, None] * dy[None, :, :])
            # dL/dw_i = gamma * <dy, x_i>
            d_weights += gamma * (x * dy[None, :, :]).sum(axis=(1, 2))
            d_gamma += float((average * dy).sum())
        # Through the softmax: dL/dalpha = w * (dL/dw - <w, dL/dw>)
        d_alpha = weights * (d_weights - (weights * d_weights).sum())
        model.inc_grad("alpha", d_alpha)
        model.inc_grad("gamma", model.ops.asarray1f([d_gamma]))
        return dX

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Uniform weights and gamma 1; nL from the data unless set."""
    if X is not None and not model.has_dim("nL"):
        model.set_dim("nL", X[0].shape[0])
    if not model.has_dim("nL"):
        raise ValueError("ScalarMix needs sample data or n_layers to initialize.")
    model.set_param("alpha", model.ops.alloc1f(model.get_dim("nL")))
    model.set_param("gamma", model.ops.asarray1f([1.0]))


def layer_weights(model: Model) -> Dict[str, object]:
    """The learned mix: softmax(alpha) per layer (0 = embeddings) and gamma.

    RETURNS (Dict[str, object]): {"weights": [float, ...], "gamma": float}.
    """
    weights = _softmax(model, model.get_param("alpha"))
    return {
        "weights": [float(w) for w in model.ops.to_numpy(weights)],
        "gamma": float(model.ops.to_numpy(model.get_param("gamma"))[0]),
    }


def tok2vec_mix_weights(model: Model) -> Optional[Dict[str, object]]:
    """layer_weights of the scalar mix in a tagger's tok2vec (its "tok2vec" ref; the mix its "scalar_mix" ref, or
    the one scalar mix inside it, as a fine-tuned LAC's in CharBigramEmbed.v3), or None: no tok2vec ref, no
    scalar mix (or several), or one not initialized yet."""
    tok2vec = model.get_ref("tok2vec") if model.has_ref("tok2vec") else None
    if tok2vec is None:
        return None
    if tok2vec.has_ref("scalar_mix"):
        mix = tok2vec.get_ref("scalar_mix")
    else:
        mixes = [node for node in tok2vec.walk() if node.name == "scalar_mix"]
        if len(mixes) != 1:
            return None
        mix = mixes[0]
    return layer_weights(mix) if mix.has_param("alpha") else None


def _softmax(model: Model, alpha: Floats1d) -> Floats1d:
    exp = model.ops.xp.exp(alpha - alpha.max())
    return exp / exp.sum()
