"""Pretrained character and bigram vectors: CharBigramEmbed(static_vectors=True), from `spacy init vectors`."""

import subprocess
import sys

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.util import load_config, load_model_from_config
from thinc.api import fix_random_seed

from spacy_cner.layers.char_bigram_embed import ngram_vectors

from conftest import REPO_ROOT, TRAIN_DATA, make_examples

# word2vec text: characters and bigrams, as Lattice-LSTM's uni + bi files joined.
WORDS = {"张": 1.0, "三": 2.0, "上": 3.0, "海": 4.0, "张三": 5.0, "上海": 6.0, "三去": 7.0}


def write_vectors(path, width=4):
    lines = [f"{len(WORDS)} {width}"] + [f"{w} " + " ".join([str(v)] * width) for w, v in WORDS.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


@pytest.fixture
def vectors_model(tmp_path):
    text = write_vectors(tmp_path / "vectors.txt")
    subprocess.run(
        [sys.executable, "-m", "spacy", "init", "vectors", "zh", str(text), str(tmp_path / "vectors")],
        check=True,
        capture_output=True,
    )
    return tmp_path / "vectors"


def test_lookup_of_chars_and_bigrams():
    nlp = spacy.blank("zh")
    for word, value in WORDS.items():
        nlp.vocab.set_vector(word, numpy.full((2,), value, dtype="f"))
    layer = ngram_vectors(prev_bigram=True)
    (out,) = layer.predict([nlp.make_doc("张三去。上海")])
    # columns: the token, (token, next), (previous, token); two values each
    expected = [
        [1, 5, 0],  # 张: 张三, none before
        [2, 7, 5],  # 三: 三去, 张三
        [0, 0, 7],  # 去: 去。 unknown, 三去
        [0, 0, 0],  # 。
        [3, 6, 0],  # 上
        [4, 0, 6],  # 海: nothing after
    ]
    assert out[:, ::2].tolist() == expected
    sentence = ngram_vectors(prev_bigram=True, sentence_bigrams=True)
    nlp.vocab.set_vector("。上", numpy.full((2,), 9.0, dtype="f"))
    assert layer.predict([nlp.make_doc("。上")])[0][1, 4] == 9.0
    assert sentence.predict([nlp.make_doc("。上")])[0][1, 4] == 0.0  # no bigram across a sentence end
    empty, one = layer.predict([nlp.make_doc(""), nlp.make_doc("张")])  # an empty doc: no rows
    assert empty.shape == (0, 6) and one[:, ::2].tolist() == [[1, 0, 0]]


def test_an_int8_table_is_read_in_steps_of_1_127():
    """An int8 vectors table (lac_vectors' dtype "int8") gives its values over 127, as float32, to
    CharBigramEmbed's vectors and to SoftLexicon's word vectors; a key the table lacks is still zeros."""
    from spacy.vectors import Vectors

    from spacy_cner.layers.soft_lexicon import WordVectorRows

    nlp = spacy.blank("zh")
    data = numpy.array([[127, -127, 3], [-64, 0, 1], [5, 100, -2]], dtype="int8")
    table = Vectors(strings=nlp.vocab.strings, data=data)
    for word, row in (("张", 0), ("三", 1), ("张三", 2)):
        table.add(nlp.vocab.strings.add(word), row=row)
    nlp.vocab.vectors = table
    (out,) = ngram_vectors(prev_bigram=False).predict([nlp.make_doc("张三去")])
    assert out.dtype == numpy.float32 and out.shape == (3, 6)
    expected = numpy.zeros((3, 6), dtype="float32")
    expected[0, :3], expected[0, 3:], expected[1, :3] = data[0], data[2], data[1]  # 张 + 张三; 三 (三去 unknown)
    numpy.testing.assert_allclose(out, expected / 127, rtol=1e-6)
    # SoftLexicon's word vectors read the same table the same way.
    numpy.testing.assert_allclose(WordVectorRows().table(table), data / 127, rtol=1e-6)


def config(vectors, static_vectors=True):
    """configs/fast.cfg (the default without its self-trained vectors) reading the vectors given."""
    overrides = {
        "paths.vectors": str(vectors) if vectors else None,
        "components.crf_ner.model.tok2vec.static_vectors": static_vectors,
        "components.crf_ner.model.tok2vec.width": 16,
        "components.crf_ner.model.encoder.width": 16,
    }
    return load_config(REPO_ROOT / "configs" / "fast.cfg", overrides=overrides, interpolate=True)


def initialized(vectors, static_vectors=True):
    fix_random_seed(0)
    nlp = load_model_from_config(config(vectors, static_vectors), auto_fill=True)
    examples = make_examples(nlp, TRAIN_DATA[:2])
    nlp.initialize(lambda: examples)
    return nlp, examples


def test_config_with_vectors_trains_saves_and_keeps_them_frozen(vectors_model, tmp_path):
    nlp, examples = initialized(vectors_model)
    assert nlp.vocab.vectors.n_keys == len(WORDS)
    before = nlp.vocab.vectors.data.copy()
    optimizer = nlp.create_optimizer()
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    numpy.testing.assert_array_equal(nlp.vocab.vectors.data, before)
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")

    def ents(doc):
        return [(e.start_char, e.end_char, e.label_) for e in doc.ents]

    assert ents(loaded("张三去了上海")) == ents(nlp("张三去了上海"))
    # The vectors reach the output: other vectors, other emission scores.
    ner = loaded.get_pipe("crf_ner")
    doc = loaded.make_doc("张三去了上海")
    scores = ner.model.predict([doc])[0].copy()
    loaded.vocab.set_vector("张", numpy.full((4,), 50.0, dtype="f"))
    assert not numpy.allclose(ner.model.predict([doc])[0], scores)


def test_a_sourced_component_brings_its_vectors_or_says_what_to_do(vectors_model, tmp_path):
    """nlp.add_pipe("crf_ner", source=trained) (the README's route to word tokens) raised IndexError on the
    first doc: the vectors stayed in the trained pipeline. A pipeline without vectors now gets them (a
    warning), tags as the trained one and saves them; one with other vectors gets an error saying what to do."""
    trained, _ = initialized(vectors_model)
    text = "张三去了上海"
    expected = [(e.start_char, e.end_char, e.label_) for e in trained(text).ents]
    nlp = spacy.blank("zh")
    with pytest.warns(UserWarning):  # spaCy's W113: the vectors differ
        nlp.add_pipe("crf_ner", source=trained)
    with pytest.warns(UserWarning, match="copied into it"):
        doc = nlp(text)
    assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == expected
    assert nlp.vocab.vectors.shape == trained.vocab.vectors.shape
    nlp.to_disk(tmp_path / "sourced")
    assert [(e.start_char, e.end_char, e.label_) for e in spacy.load(tmp_path / "sourced")(text).ents] == expected
    other = spacy.blank("zh")
    other.vocab.set_vector("的", numpy.ones(7, dtype="f"))
    with pytest.warns(UserWarning):
        other.add_pipe("crf_ner", source=trained)
    with pytest.raises(ValueError, match="nlp.vocab.vectors = trained.vocab.vectors"):
        other(text)


def test_a_sourced_component_refuses_other_vectors_of_the_same_width(vectors_model, tmp_path):
    """Issue 85: sourced into a pipeline whose vocab had other vectors of the same width, crf_ner tagged with
    them (other entities; spaCy's W113 warning only) and the saved pipeline then refused to load. Now predict
    and update refuse, saying what to do; with the trained pipeline's vectors it tags as the trained one."""
    trained, examples = initialized(vectors_model)
    text = "张三去了上海"
    other = spacy.blank("zh")
    for word in WORDS:  # the same keys and width, other values
        other.vocab.set_vector(word, numpy.full((4,), 9.0, dtype="f"))
    with pytest.warns(UserWarning):  # spaCy's W113
        other.add_pipe("crf_ner", source=trained)
    with pytest.raises(ValueError, match=r"trained with other vectors .*nlp.vocab.vectors = trained.vocab.vectors"):
        other(text)
    with pytest.raises(ValueError, match="trained with other vectors"):
        other.update(make_examples(other, TRAIN_DATA[:2]), sgd=other.create_optimizer())
    other.vocab.vectors = trained.vocab.vectors  # what the message says to do
    assert [(e.start, e.end, e.label_) for e in other(text).ents] == [
        (e.start, e.end, e.label_) for e in trained(text).ents
    ]
    other.to_disk(tmp_path / "sourced")
    assert spacy.load(tmp_path / "sourced")(text).text == text


def test_a_pipe_that_reads_no_vectors_saves_and_loads_beside_other_vectors(tmp_path):
    """The vectors' checksum covers only vectors the model reads: a crf_ner without static vectors, sourced into a
    pipeline that has vectors of its own, saves a pipeline that loads (it was refused as altered vectors)."""
    trained, _ = initialized(None, static_vectors=False)
    nlp = spacy.blank("zh")
    nlp.vocab.set_vector("的", numpy.ones(3, dtype="f"))
    with pytest.warns(UserWarning):  # spaCy's W113: the vectors differ
        nlp.add_pipe("crf_ner", source=trained)
    expected = [(e.start_char, e.end_char, e.label_) for e in nlp("张三去了上海").ents]
    nlp.to_disk(tmp_path / "sourced")
    loaded = spacy.load(tmp_path / "sourced")
    assert [(e.start_char, e.end_char, e.label_) for e in loaded("张三去了上海").ents] == expected
    assert loaded.vocab.get_vector("的").tolist() == [1.0, 1.0, 1.0]


def test_vectors_without_the_option_raise(vectors_model):
    with pytest.raises(ValueError, match="no component reads them.*static_vectors"):
        initialized(vectors_model, static_vectors=False)


def test_the_option_without_vectors_raises():
    with pytest.raises(ValueError, match="static_vectors = true but the pipeline has no vectors"):
        initialized(None, static_vectors=True)


ALPHABET = ["张", "三", "上", "海", "。", "\n", "ab", "c", "去"]


def reference_rows(doc, prev_bigram, sentence_bigrams):
    """Vectors.find, one text at a time: the rows ngram_vectors must read."""
    from spacy_cner.long_docs import ends_sentence

    vectors, texts = doc.vocab.vectors, [token.text for token in doc]
    joins = [a + b for a, b in zip(texts, texts[1:])] + ([""] if texts else [])
    if sentence_bigrams:
        joins = ["" if j and ends_sentence(texts[i]) else j for i, j in enumerate(joins)]
    columns = [texts, joins] + ([[""] + joins[:-1]] if prev_bigram else [])
    return [[vectors.find(key=column[i]) if column[i] else -1 for column in columns] for i in range(len(doc))]


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.sampled_from(ALPHABET), max_size=12),
    keys=st.sets(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=2).map("".join), max_size=30),
    prev_bigram=st.booleans(),
    sentence_bigrams=st.booleans(),
    mix=st.sampled_from([None, 0]),
)
def test_bulk_lookup_equals_find_one_by_one(words, keys, prev_bigram, sentence_bigrams, mix):
    """The sorted-array lookup reads exactly Vectors.find's rows, for multi-character tokens,
    sentence ends and (a mix of 0) bigrams whose mixed keys collide."""

    from spacy_cner.layers import ngram_vectors as module

    with pytest.MonkeyPatch.context() as patch:
        if mix is not None:
            patch.setattr(module, "_PAIR_MIX", numpy.uint64(mix))
        check_bulk_lookup(module, words, keys, prev_bigram, sentence_bigrams)


def check_bulk_lookup(module, words, keys, prev_bigram, sentence_bigrams):
    from spacy.tokens import Doc

    nlp = spacy.blank("zh")
    for i, key in enumerate(sorted(keys)):
        nlp.vocab.set_vector(key, numpy.full((2,), i + 1, dtype="f"))
    if not keys:
        nlp.vocab.set_vector("张", numpy.ones((2,), dtype="f"))
    module._INDEXES.clear()
    doc = Doc(nlp.vocab, words=words, spaces=[False] * len(words))
    rows = module._vector_index(nlp.vocab.vectors).doc_rows(doc, prev_bigram, sentence_bigrams)
    assert rows.tolist() == reference_rows(doc, prev_bigram, sentence_bigrams)
    (out,) = ngram_vectors(prev_bigram, sentence_bigrams).predict([doc])
    data = nlp.vocab.vectors.data
    expected = [[v for row in doc_row for v in (data[row] if row >= 0 else [0.0, 0.0])] for doc_row in rows.tolist()]
    assert out.tolist() == expected


def test_bulk_lookup_without_the_keys_texts_and_after_new_keys():
    """A key whose text the string store lacks sends bigrams to the text lookup; a table that
    grows is indexed again."""
    from spacy.strings import get_string_id
    from spacy.tokens import Doc

    from spacy_cner.layers.ngram_vectors import _vector_index

    nlp = spacy.blank("zh")
    nlp.vocab.vectors.resize((4, 2))
    nlp.vocab.vectors.add(get_string_id("上海"), vector=numpy.full((2,), 6.0, dtype="f"))  # no text stored
    doc = Doc(nlp.vocab, words=["去", "上", "海"], spaces=[False] * 3)
    assert _vector_index(nlp.vocab.vectors).doc_rows(doc, True, False).tolist() == reference_rows(doc, True, False)
    assert _vector_index(nlp.vocab.vectors).pairs is False
    nlp.vocab.vectors.add("去上", vector=numpy.full((2,), 7.0, dtype="f"))
    rows = _vector_index(nlp.vocab.vectors).doc_rows(doc, True, False)
    assert rows[0, 1] >= 0 and rows.tolist() == reference_rows(doc, True, False)


def test_bulk_lookup_of_bigrams_whose_mixed_keys_collide(monkeypatch):
    """Two bigrams that share a mixed key (a mix of 0 keys a bigram by its right character)
    both find their own rows."""
    from spacy_cner.layers import ngram_vectors as module

    monkeypatch.setattr(module, "_PAIR_MIX", numpy.uint64(0))
    check_bulk_lookup(module, ["上", "三", "张", "三", "海", "三"], {"张三", "上三", "海三", "三"}, True, False)


@settings(max_examples=60, deadline=None)
@given(
    batch=st.lists(st.lists(st.sampled_from(ALPHABET), max_size=6), min_size=1, max_size=5),
    keys=st.sets(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=2).map("".join), max_size=30),
    prev_bigram=st.booleans(),
    sentence_bigrams=st.booleans(),
)
def test_a_batch_reads_each_docs_own_rows(batch, keys, prev_bigram, sentence_bigrams):
    """One lookup for the whole batch: no bigram across two docs (empty and one-token docs
    included), and each doc's vectors are the ones it gets alone."""
    from spacy.tokens import Doc

    from spacy_cner.layers import ngram_vectors as module

    nlp = spacy.blank("zh")
    for i, key in enumerate(sorted(keys | {"张"})):
        nlp.vocab.set_vector(key, numpy.full((2,), i + 1, dtype="f"))
    module._INDEXES.clear()
    docs = [Doc(nlp.vocab, words=words, spaces=[False] * len(words)) for words in batch]
    rows = module._vector_index(nlp.vocab.vectors).batch_rows(docs, prev_bigram, sentence_bigrams)
    assert rows.tolist() == [row for doc in docs for row in reference_rows(doc, prev_bigram, sentence_bigrams)]
    layer = ngram_vectors(prev_bigram, sentence_bigrams)
    together = layer.predict(docs)
    assert [out.tolist() for out in together] == [layer.predict([doc])[0].tolist() for doc in docs]
