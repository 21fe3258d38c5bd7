"""Growing a `crf_ner` model's output layer and CRF when a label is added after initialize."""

from typing import List

import numpy
from thinc.api import Linear, Model

from ..layers.crf import resize_crf


def resize_output(model: Model, old_tags: List[str], new_tags: List[str]) -> None:
    """Grow the output layer and the CRF from old_tags to new_tags, weights kept by tag name (new
    tags start at zero).

    Why by hand, not thinc's `resizable` (spaCy's textcat): that wraps the output layer when the
    model is built, and the models CRFTagger.v1 built and saved so far have no wrapper; keeping the
    weights by tag name holds whatever the order of the tags. A layer's dims are fixed once it has
    weights: a larger Linear is swapped in, as spaCy's parser resizes its output, and the weightless
    layers around it widened.
    """
    old_index = {tag: i for i, tag in enumerate(old_tags)}
    rows = numpy.asarray([old_index.get(tag, -1) for tag in new_tags])
    kept = rows >= 0
    ops = model.ops
    output = model.get_ref("output_layer")
    W, b = ops.to_numpy(output.get_param("W")), ops.to_numpy(output.get_param("b"))
    new_W = numpy.zeros((len(new_tags), W.shape[1]), dtype=W.dtype)
    new_b = numpy.zeros((len(new_tags),), dtype=b.dtype)
    new_W[kept], new_b[kept] = W[rows[kept]], b[rows[kept]]
    larger = Linear(nO=len(new_tags), nI=W.shape[1])
    larger.set_param("W", ops.asarray2f(new_W))
    larger.set_param("b", ops.asarray1f(new_b))
    for node in list(model.walk()):
        if output in node.layers:
            node.layers[node.layers.index(output)] = larger
    for node in model.walk():
        if node.has_ref("output_layer"):
            node.set_ref("output_layer", larger)
    for node in model.walk():
        if node is not larger and larger in node.walk() and node.has_dim("nO"):
            node.set_dim("nO", len(new_tags), force=True)
    resize_crf(model.get_ref("crf"), new_tags)
