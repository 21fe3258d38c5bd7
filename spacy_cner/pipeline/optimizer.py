"""The `crf_ner` pipe's optimizer step: the tok2vec's weights at a multiple of the learning rate
(a pretrained transformer learns slower than the new layers above it), exact embedding tables
row by row."""

from thinc.api import Model, Optimizer

from ..layers.key_embed import update_rows


class ScaledOptimizer:
    """An optimizer whose learning rate is `scale` times the wrapped one's (schedules included).

    thinc's Optimizer takes one lr_scale per call, not per parameter: this wrapper gives the
    tok2vec's parameters theirs while the optimizer's state (moments, step count) stays one.
    """

    def __init__(self, optimizer: Optimizer, scale: float):
        self._optimizer = optimizer
        self._scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self._optimizer(key, weights, gradient, lr_scale=lr_scale * self._scale)

    def __getattr__(self, name):
        return getattr(self._optimizer, name)


def apply_gradients(model: Model, sgd: Optimizer, tok2vec_scale: float) -> None:
    """Update the weights of model from their gradients: the tok2vec's at tok2vec_scale times the
    optimizer's rate, except a lexicon adapter's inside it (new weights: the full rate), a layer with a
    learn_rate_scale attr (LacFeatures.v2 fine-tuned) at that multiple for its own weights, and the
    exact bigram tables (spacy-cner.KeyEmbed.v1) only on the rows the step touched.

    model (Model): The pipe's model, with a "tok2vec" ref.
    sgd (Optimizer): The optimizer.
    tok2vec_scale (float): The tok2vec's learning rate as a multiple of the optimizer's.
    """
    adapters = [n for n in model.walk() if n.name == "lexicon_adapter"]
    own_rate = {node.id for adapter in adapters for node in adapter.walk()}
    tok2vec_nodes = {node.id for node in model.get_ref("tok2vec").walk()} - own_rate if tok2vec_scale != 1.0 else set()
    scaled = ScaledOptimizer(sgd, tok2vec_scale)

    def optimizer_of(node: Model):
        # A layer's own learn_rate_scale (a fine-tuned LAC's) covers its own weights, not its sublayers'.
        if node.attrs.get("learn_rate_scale", 1.0) != 1.0:
            return ScaledOptimizer(sgd, node.attrs["learn_rate_scale"])
        return scaled if node.id in tok2vec_nodes else sgd

    for node in model.walk():
        optimizer = optimizer_of(node)
        for shim in node.shims:
            shim.finish_update(optimizer)
    for node in model.walk():
        optimizer = optimizer_of(node)
        if node.name == "key_embed":
            # Exact tables: only the rows this step's examples touched (KeyEmbed.v1).
            update_rows(node, optimizer)
            continue
        for name in node.param_names:
            if node.has_grad(name):
                param, _ = optimizer((node.id, name), node.get_param(name), node.get_grad(name))
                node.set_param(name, param)
