"""KeyEmbed: a row per training key, row 0 for the rest; row-sparse updates equal dense ones on the rows."""

import numpy
import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam, SGD, fix_random_seed

from spacy_cner.layers.char_bigram_embed import CharBigramEmbed_v2, ngram_keys, size_key_tables
from spacy_cner.layers.key_embed import UNKNOWN_ROW, KeyEmbed, lookup, set_keys, update_rows

KEYS = numpy.asarray([[5, 70], [5, 71], [6, 70], [7, 72], [5, 70]], dtype="uint64")


def make_table(min_count=1, width=4, dropout=None):
    fix_random_seed(0)
    model = KeyEmbed(width, column=1, min_count=min_count, dropout=dropout)
    set_keys(model, [KEYS[:3], KEYS[3:]])
    model.initialize()
    return model


def test_a_row_per_key_and_one_unknown_row():
    model = make_table()
    assert model.get_dim("nV") == 4  # 70, 71, 72 and the unknown row
    rows = lookup(model, numpy.asarray([70, 71, 72, 99, 0], dtype="uint64"))
    assert rows.tolist() == [1, 2, 3, UNKNOWN_ROW, UNKNOWN_ROW]
    E = model.get_param("E")
    output = model.predict(numpy.asarray([[0, 72], [0, 99], [0, 70]], dtype="uint64"))
    numpy.testing.assert_array_equal(output, E[[3, 0, 1]])


def test_min_count_sends_rare_keys_to_the_unknown_row():
    model = make_table(min_count=2)
    assert model.get_dim("nV") == 2  # only 70 occurs twice
    assert lookup(model, numpy.asarray([70, 71, 72], dtype="uint64")).tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match="min_count"):
        KeyEmbed(4, column=1, min_count=0)


def test_initialize_without_keys_says_what_to_do():
    with pytest.raises(ValueError, match="set_keys"):
        KeyEmbed(4, column=1).initialize()


def test_backprop_writes_only_the_touched_rows():
    model = make_table()
    X = numpy.asarray([[0, 70], [0, 99], [0, 70]], dtype="uint64")
    _, backprop = model.begin_update(X)
    backprop(numpy.ones((3, 4), dtype="float32"))
    G = model.get_grad("E")
    numpy.testing.assert_array_equal(G[1], 2.0)  # key 70, twice
    numpy.testing.assert_array_equal(G[0], 1.0)  # the unknown key
    assert not G[2:].any()


def step(model, X, dY, optimizer, sparse):
    _, backprop = model.begin_update(X)
    backprop(dY)
    if sparse:
        update_rows(model, optimizer)
    else:
        model.finish_update(optimizer)
        model.attrs["touched_rows"] = []


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda: Adam(0.01, L2=0.0, grad_clip=0.5),
        lambda: Adam(0.01, L2=0.1, L2_is_weight_decay=True, use_averages=True),
        lambda: SGD(0.1),
    ],
)
def test_row_update_equals_the_dense_update_on_the_rows(make_optimizer):
    """Steps that touch the same rows give the dense optimizer's weights, moments and averages;
    the rows no step touched keep their weights (no decay, no momentum: lazy Adam)."""
    X = numpy.asarray([[0, 70], [0, 71], [0, 70]], dtype="uint64")
    rng = numpy.random.default_rng(0)
    dYs = [rng.normal(size=(3, 4)).astype("float32") for _ in range(3)]
    tables = {}
    for sparse in (False, True):
        model, optimizer = make_table(), make_optimizer()
        untouched = model.get_param("E")[[0, 3]].copy()
        for dY in dYs:
            step(model, X, dY.copy(), optimizer, sparse)
        tables[sparse] = (model.get_param("E").copy(), optimizer, model.id)
        if sparse:
            numpy.testing.assert_array_equal(model.get_param("E")[[0, 3]], untouched)
            assert not model.get_grad("E").any()
    (dense, dense_opt, dense_id), (sparse, sparse_opt, sparse_id) = tables[False], tables[True]
    numpy.testing.assert_allclose(sparse[[1, 2]], dense[[1, 2]], rtol=1e-6, atol=1e-7)
    assert sparse_opt.nr_update[(sparse_id, "E")] == dense_opt.nr_update[(dense_id, "E")] == 3
    for name in ("mom1", "mom2"):
        if (dense_id, "E") in getattr(dense_opt, name):
            numpy.testing.assert_allclose(
                getattr(sparse_opt, name)[(sparse_id, "E")].reshape(4, 4)[[1, 2]],
                getattr(dense_opt, name)[(dense_id, "E")].reshape(4, 4)[[1, 2]],
                rtol=1e-6,
                atol=1e-9,
            )
    if dense_opt.averages is not None:
        numpy.testing.assert_allclose(
            sparse_opt.averages[(sparse_id, "E")][[1, 2]],
            dense_opt.averages[(dense_id, "E")][[1, 2]],
            rtol=1e-6,
            atol=1e-7,
        )
    assert not any(key[-1] == "rows" for key in sparse_opt.nr_update)


def test_bytes_round_trip_into_a_model_without_keys():
    """A loaded pipeline builds the table from its config (no keys, nV unset), then reads them."""
    model = make_table()
    X = numpy.asarray([[0, 70], [0, 72], [0, 99]], dtype="uint64")
    fresh = KeyEmbed(4, column=1).from_bytes(model.to_bytes())
    assert fresh.get_dim("nV") == 4
    numpy.testing.assert_array_equal(fresh.predict(X), model.predict(X))


def test_size_key_tables_counts_the_corpus_bigrams():
    nlp = spacy.blank("zh")
    docs = [nlp.make_doc(text) for text in ("北京是首都", "北京", "上海")]
    model = CharBigramEmbed_v2(8, char_rows=50, bigram_min_count=1, prev_bigram=True)
    rows = size_key_tables(model, docs, batch_size=2)
    keys = ngram_keys(True).predict(docs)
    for column in (1, 2):
        distinct = {k for doc_keys in keys for k in doc_keys[:, column].tolist()}
        assert rows[f"column {column}"] == len(distinct) + 1
    model.initialize(X=docs)
    (seen,) = model.predict([nlp.make_doc("北京")])
    (again,) = model.predict([nlp.make_doc("北京")])
    numpy.testing.assert_array_equal(seen, again)
    assert size_key_tables(CharBigramEmbed_v2(8, char_rows=50, bigram_rows=60), docs) == {}


def test_crf_ner_sizes_the_tables_at_initialize_and_saves_them(tmp_path, capsys):
    """The pipe counts the train corpus's bigrams, logs the sizes, trains, and a saved pipeline
    predicts the same after spacy.load (which never sees the corpus)."""
    train = [("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("我在北京市工作", [(2, 5, "LOC")])]
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    tok2vec = {
        "@architectures": "spacy-cner.CharBigramEmbed.v2",
        "width": 16,
        "char_rows": 100,
        "bigram_rows": None,
        "dropout": 0.0,
        "bigram_dropout": 0.3,
    }
    encoder = {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 16, "dropout": 0.0}
    ner = nlp.add_pipe(
        "crf_ner",
        config={
            "model": {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": encoder},
            "adversarial": {"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0},
        },
    )
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in train]
    optimizer = nlp.initialize(lambda: examples)
    tables = [node for node in ner.model.walk() if node.name == "key_embed"]
    assert [t.get_dim("nV") for t in tables] == [14, 14]  # 13 characters: 13 next and 13 previous bigrams
    assert "exact bigram tables of 14 and 14 rows" in capsys.readouterr().out
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    assert [(e.text, e.label_) for e in nlp("张三去了上海").ents] == [("张三", "PER"), ("上海", "LOC")]
    texts = ["张三在北京市工作", "李四去了深圳"]
    expected = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in loaded.pipe(texts)] == expected
    table = next(node for node in loaded.get_pipe("crf_ner").model.walk() if node.name == "key_embed")
    numpy.testing.assert_array_equal(table.get_param("E"), tables[0].get_param("E"))


@pytest.mark.parametrize("method", ["fgm", "fgsm"])
def test_adversarial_attack_moves_the_touched_rows_as_a_dense_attack(method):
    from spacy_cner.training.adversarial import EmbeddingAttack

    model = make_table()
    _, backprop = model.begin_update(numpy.asarray([[0, 70], [0, 99]], dtype="uint64"))
    backprop(numpy.random.default_rng(0).normal(size=(2, 4)).astype("float32"))
    attack = EmbeddingAttack(method, 0.5)
    before, gradient = model.get_param("E").copy(), model.get_grad("E").copy()
    restore = attack.perturb(model)
    numpy.testing.assert_allclose(model.get_param("E"), before + attack.perturbation(numpy, gradient), rtol=1e-6)
    restore()
    numpy.testing.assert_array_equal(model.get_param("E"), before)
