"""use_numpy_blas: the CRF tagger's and CharBigramEmbed's layers multiply with numpy's BLAS on CPU."""
import numpy
import spacy
from spacy.util import registry
from thinc.api import Model, NumpyOps, fix_random_seed, get_current_ops, set_current_ops

import spacy_cner  # noqa: F401  (registers the layers)
from spacy_cner.layers._blas import use_numpy_blas
from spacy_cner.layers.char_bigram_embed import CharBigramEmbed

TAGGER = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16, "char_rows": 50, "bigram_rows": 50},
    "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 8},
}
TAG_NAMES = ["O", "B-X", "I-X", "E-X", "S-X"]


def thinc_nodes(model: Model):
    # The torch layers' thinc wrappers do no matrix products of their own.
    return [node for node in model.walk() if type(node.ops) is NumpyOps]


def test_the_tagger_is_built_on_numpy_blas_and_predicts_as_on_blis():
    fix_random_seed(0)
    model = registry.resolve({"model": TAGGER})["model"]
    nodes = thinc_nodes(model)
    assert nodes and all(not node.ops.use_blis for node in nodes)
    docs = [spacy.blank("zh").make_doc(text) for text in ["北京欢迎你", "上海", "我在南京市长江大桥"]]
    model.initialize(X=docs, Y=TAG_NAMES)
    on_numpy = model.predict(docs)
    model._to_ops(NumpyOps())  # thinc's default CPU ops, blis
    assert all(node.ops.use_blis for node in thinc_nodes(model))
    on_blis = model.predict(docs)
    for ours, theirs in zip(on_numpy, on_blis):
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_char_bigram_embed_alone_is_on_numpy_blas():
    """A tok2vec component of its own (a listener's source) gets numpy's BLAS too."""
    assert all(not node.ops.use_blis for node in thinc_nodes(CharBigramEmbed(8, char_rows=20, bigram_rows=20)))


def test_other_ops_are_left_alone():
    class OtherOps(NumpyOps):
        name = "other"

    previous = get_current_ops()
    set_current_ops(OtherOps())
    try:
        model = CharBigramEmbed(8, char_rows=20, bigram_rows=20)
    finally:
        set_current_ops(previous)
    assert all(type(node.ops) is OtherOps for node in model.walk())
    without_blis = NumpyOps(use_blis=False)
    model = Model("mine", lambda model, X, is_train: (X, lambda dY: dY), ops=without_blis)
    use_numpy_blas(model)
    assert model.ops is without_blis
