"""One table test over every layer and architecture that spacy_cner registers.

A new registered layer must get a row in ROWS: test_every_registered_name_has_a_row fails until it does.
"""

import configparser
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import numpy
import pytest
import spacy
from spacy.util import registry
from thinc.api import Config, Model, fix_random_seed

import spacy_cner  # noqa: F401  (registers the layers)
from spacy_cner.tags import get_tag_names

from conftest import REPO_ROOT

PREFIX = "spacy-cner."
TAG_NAMES = get_tag_names(["LOC", "PER"], "BIOES")
N_TAGS = len(TAG_NAMES)
TEXTS = ["北京是中国的首都", "", "我爱上海", "京"]


def make_docs(with_empty: bool = True):
    nlp = spacy.blank("zh")
    return [nlp.make_doc(text) for text in TEXTS if text or with_empty]


def make_arrays(width: int, lengths: List[int]):
    rng = numpy.random.default_rng(0)
    return [rng.normal(size=(n, width)).astype("float32") for n in lengths]


def make_crf_input():
    emissions = make_arrays(N_TAGS, [4, 1, 3])
    allowed = [numpy.ones_like(em) for em in emissions]
    allowed[0][1] = 0
    allowed[0][1, 1] = 1  # B-LOC known at token 1 of doc 0
    return emissions, allowed


def split_list(X):
    return [X[i : i + 1] for i in range(len(X))]


def split_crf_input(X):
    emissions, allowed = X
    return [([em], [al]) for em, al in zip(emissions, allowed)]


@dataclass
class Row:
    registry: str  # the registry the name is resolved from in configs
    config: str  # the block's settings, without the @ line
    make_X: Callable[[], Any]
    split: Callable[[Any], List[Any]] = split_list
    Y: Optional[Any] = None  # passed to initialize
    doc_input: bool = True  # docs carry no gradient
    dropout: bool = True  # the config sets dropout > 0
    fixture: Optional[str] = None  # a conftest fixture whose value fills {fixture} in config
    exact_bytes: bool = True  # from_bytes reproduces outputs bit for bit
    prepare: Optional[Callable[[Model], None]] = None  # what the pipe does before initialize
    has_weights: bool = True  # False: a feature layer, nothing to train

    def resolve(self, name: str, request) -> Model:
        config = self.config
        if self.fixture is not None:
            config = config.replace("{fixture}", str(request.getfixturevalue(self.fixture)))
        text = f'[model]\n@{self.registry} = "{name}"\n{config}'
        return registry.resolve(Config().from_str(text))["model"]


def docs_and_arrays(width: int):
    docs = make_docs()
    return docs, make_arrays(width, [len(doc) for doc in docs])


def split_docs_and_arrays(X):
    docs, arrays = X
    return [([doc], [array]) for doc, array in zip(docs, arrays)]


def give_lexicon(model: Model) -> None:
    from spacy_cner.layers.lexicon_slot import set_lexicon
    from spacy_cner.lexicon import Lexicon

    set_lexicon(model, Lexicon(["北京", "中国", "首都", "上海", "爱上"]))


def make_docs_with_word_vectors():
    """make_docs in a vocab that has vectors of three of give_lexicon's words (and of a character)."""
    from spacy.vectors import Vectors

    nlp = spacy.blank("zh")
    words = ["北京", "中国", "上海", "京"]
    data = numpy.arange(len(words) * 3, dtype="float32").reshape(len(words), 3) / 10
    nlp.vocab.vectors = Vectors(strings=nlp.vocab.strings, data=data, keys=[nlp.vocab.strings.add(w) for w in words])
    return [nlp.make_doc(text) for text in TEXTS]


def give_key_tables(model: Model) -> None:
    from spacy_cner.layers.char_bigram_embed import size_key_tables

    size_key_tables(model, make_docs()[:1])  # the other docs' bigrams are unknown


def make_keys():
    return numpy.asarray([[1, 70], [2, 71], [3, 99], [4, 70]], dtype="uint64")


def give_keys(model: Model) -> None:
    from spacy_cner.layers.key_embed import set_keys

    set_keys(model, [make_keys()[:2]])


ROWS = {
    "spacy-cner.CharBigramEmbed.v2": Row(
        "architectures",
        "width = 8\nchar_rows = 50\nbigram_rows = null\nprev_bigram = true\ndropout = 0.3\nbigram_dropout = 0.2\n",
        make_docs,
        prepare=give_key_tables,
    ),
    "spacy-cner.CharBigramEmbed.v3": Row(
        "architectures",
        "\n".join(
            [
                "width = 8\nchar_rows = 50\nbigram_rows = 60\nprev_bigram = true\ndropout = 0.3",
                "[model.lac_features]",
                '@layers = "spacy-cner.LacFeatures.v1"',
                'sdist = "{fixture}"\nprojected_width = 3\nwindow_size = 4',
            ]
        ),
        make_docs,
        fixture="fake_lac_sdist",  # a tiny fabricated LAC tagger (tests/fake_lac.py)
    ),
    "spacy-cner.LacFeatures.v1": Row(
        "layers",
        'sdist = "{fixture}"\nwindow_size = 4\n',  # windows of 4 characters: overlapping ones in 北京是中国的首都
        make_docs,
        dropout=False,
        fixture="fake_lac_sdist",
        has_weights=False,
    ),
    # Fine-tuned, with the scalar mix over LAC's layers (tests/layers/test_lac_encoder.py has the rest).
    "spacy-cner.LacFeatures.v2": Row(
        "layers",
        'sdist = "{fixture}"\nwindow_size = 4\nfine_tune = true\n\n'
        '[model.scalar_mix]\n@layers = "spacy-cner.ScalarMix.v1"\n',
        make_docs,
        dropout=False,
        fixture="fake_lac_sdist",
    ),
    "spacy-cner.KeyEmbed.v1": Row(
        "layers",
        "nO = 5\ncolumn = 1\ndropout = 0.3\n",
        make_keys,
        prepare=give_keys,
    ),
    "spacy-cner.CharBigramEmbed.v1": Row(
        "architectures",
        "width = 8\nchar_rows = 50\nbigram_rows = 60\nprev_bigram = true\ndropout = 0.3\n",
        make_docs,
    ),
    "spacy-cner.BiLSTMEncoder.v1": Row(
        "layers",
        "width = 6\ndepth = 2\ndropout = 0.4\n",
        lambda: make_arrays(5, [3, 0, 5, 1]),
        doc_input=False,
    ),
    "spacy-cner.TENEREncoder.v1": Row(
        "layers",
        "n_heads = 2\nhead_width = 4\ndepth = 2\ndropout = 0.2\nattention_dropout = 0.2\noutput_dropout = 0.2\n",
        lambda: make_arrays(5, [3, 0, 5, 1]),
        doc_input=False,
    ),
    "spacy-cner.ScalarMix.v1": Row(
        "layers",
        "n_layers = 3\n",
        lambda: [a.reshape(3, -1, 2) for a in make_arrays(2, [9, 0, 3])],
        doc_input=False,
        dropout=False,
    ),
    "spacy-cner.TransformerTok2Vec.v1": Row(
        "architectures",
        'name = "{fixture}"\nscalar_mix = true\nwindow_size = 8\n',
        make_docs,
        dropout=False,  # the tiny model has none
        fixture="tiny_bert",
        # spacy-transformers rebuilds the model with the eager attention kernel, not sdpa.
        exact_bytes=False,
    ),
    "spacy-cner.LexiconAdapter.v1": Row(
        "layers",
        "max_words_per_char = 2\nword_width = 4\nword_rows = 30\ndropout = 0.3\nnI = 6\n",
        lambda: docs_and_arrays(6),
        split=split_docs_and_arrays,
        doc_input=True,  # (docs, arrays): the backprop returns the arrays' gradient only
        prepare=give_lexicon,
    ),
    "spacy-cner.SoftLexicon.v1": Row(
        "layers", "softword = true\n", make_docs, dropout=False, prepare=give_lexicon, has_weights=False
    ),
    "spacy-cner.SoftLexicon.v2": Row(
        "layers",
        "softword = false\nword_vectors = true\n",
        make_docs_with_word_vectors,
        dropout=False,
        prepare=give_lexicon,
        has_weights=False,
    ),
    "spacy-cner.CRF.v1": Row(
        "layers", "", make_crf_input, split=split_crf_input, Y=TAG_NAMES, doc_input=False, dropout=False
    ),
    "spacy-cner.CRFTagger.v1": Row(
        "architectures",
        "\n".join(
            [
                "nO = null",
                "[model.tok2vec]",
                '@architectures = "spacy-cner.CharBigramEmbed.v1"',
                "width = 8\nchar_rows = 50\nbigram_rows = 60\ndropout = 0.3",
                "[model.encoder]",
                '@layers = "spacy-cner.BiLSTMEncoder.v1"',
                "width = 6\ndropout = 0.4",
            ]
        ),
        make_docs,
        Y=TAG_NAMES,
    ),
}


def registered_names():
    names = set()
    for reg in (registry.architectures, registry.layers):
        names.update(name for name in reg.get_all() if name.startswith(PREFIX))
    return names


def test_every_registered_name_has_a_row():
    names = registered_names()
    assert names, "no spacy-cner layers found in the registry"
    missing = names - set(ROWS)
    assert not missing, f"Add a row to ROWS in {__file__} for: {sorted(missing)}"
    assert not set(ROWS) - names, "ROWS names a layer that is not registered"


def declared_entry_points(group: str):
    """The spacy-cner names setup.cfg declares in an entry-point group."""
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(REPO_ROOT / "setup.cfg", encoding="utf8")
    lines = setup_cfg.get("options.entry_points", group, fallback="").splitlines()
    return {line.split("=")[0].strip() for line in lines if line.strip().startswith(PREFIX)}


@pytest.mark.parametrize("reg,group", [("architectures", "spacy_architectures"), ("layers", "thinc_layers")])
def test_entry_points_match_registrations(reg, group):
    """A config naming @layers = "spacy-cner.X" resolves in a fresh process only through
    the matching entry-point group (spaCy does not import spacy_cner by itself).
    After fixing setup.cfg, reinstall (pip install -e .) to refresh the installed entry points."""
    expected = {name for name, row in ROWS.items() if row.registry == reg}
    assert expected <= declared_entry_points(group), f"setup.cfg [options.entry_points] {group}"


def outputs(Y) -> List[numpy.ndarray]:
    """Per-item outputs: list layers give a list, the CRF a (batch,) array."""
    return [numpy.asarray(y) for y in Y]


def initialized(name: str, request) -> Tuple[Row, Model, Any]:
    """The row, its layer initialized (seed 0), and a fresh batch of inputs."""
    fix_random_seed(0)
    row = ROWS[name]
    model = row.resolve(name, request)
    if row.prepare is not None:
        row.prepare(model)
    model.initialize(X=row.make_X(), Y=row.Y)
    return row, model, row.make_X()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_forward_backprop(name, request):
    row, model, X = initialized(name, request)
    Y, backprop = model.begin_update(X)
    Ys = outputs(Y)
    assert len(Ys) == len(row.split(X))
    assert all(numpy.isfinite(y).all() for y in Ys)
    rng = numpy.random.default_rng(1)
    if isinstance(Y, list):
        dY = [rng.normal(size=y.shape).astype("float32") for y in Y]
    else:
        dY = rng.normal(size=Y.shape).astype("float32")
    dX = backprop(dY)
    if not row.doc_input:
        X_arrays = X[0] if isinstance(X, tuple) else X
        dX_arrays = dX[0] if isinstance(dX, tuple) else dX
        assert [d.shape for d in dX_arrays] == [x.shape for x in X_arrays]
        assert all(numpy.isfinite(d).all() for d in dX_arrays)
        assert any(numpy.abs(d).sum() > 0 for d in dX_arrays)
    grads = [node.get_grad(param) for node in model.walk() for param in node.param_names if node.has_grad(param)]
    shim_grads = [
        p.grad
        for shim in (s for node in model.walk() for s in node.shims)
        for p in shim._model.parameters()
        if p.grad is not None
    ]
    # A sparse gradient (a fine-tuned LAC's embeddings) checked as its dense form.
    all_grads = [numpy.asarray(g) for g in grads] + [(g.to_dense() if g.is_sparse else g).numpy() for g in shim_grads]
    if not row.has_weights:
        assert not all_grads and not any(node.param_names for node in model.walk())
        return
    assert all_grads, "no parameter received a gradient"
    assert all(numpy.isfinite(g).all() for g in all_grads)
    assert any(numpy.abs(g).sum() > 0 for g in all_grads)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_batch_equals_items(name, request):
    row, model, X = initialized(name, request)
    batch = outputs(model.predict(X))
    for item_X, y in zip(row.split(X), batch):
        (item,) = outputs(model.predict(item_X))
        assert item.shape == y.shape
        numpy.testing.assert_allclose(item, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_no_dropout_at_predict(name, request):
    row, model, X = initialized(name, request)
    first, second = outputs(model.predict(X)), outputs(model.predict(X))
    for a, b in zip(first, second):
        numpy.testing.assert_array_equal(a, b)
    if row.dropout:
        # The dropout the config asks for is live in training, so the check above means something.
        train_a, _ = model.begin_update(X)
        train_b, _ = model.begin_update(X)
        assert any(not numpy.allclose(a, b) for a, b in zip(outputs(train_a), outputs(train_b)))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_bytes_round_trip_into_fresh_model(name, request):
    row, model, X = initialized(name, request)
    expected = outputs(model.predict(X))
    fix_random_seed(1)  # the fresh model must not rely on the same random init
    fresh = row.resolve(name, request)
    if row.prepare is not None:
        row.prepare(fresh)
    fresh.from_bytes(model.to_bytes())
    for a, b in zip(expected, outputs(fresh.predict(X))):
        if row.exact_bytes:
            numpy.testing.assert_array_equal(a, b)
        else:
            numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
