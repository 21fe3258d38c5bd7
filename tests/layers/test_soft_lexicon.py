"""SoftLexicon features and softword: against a per-character reference, in a pipeline, saved."""

import math
import subprocess
import sys

import numpy
import pytest
import spacy
from numpy.testing import assert_allclose
from thinc.api import fix_random_seed

from spacy_cner.layers.soft_lexicon import POSITIONS, char_features, softword_positions, token_features
from spacy_cner.lexicon import Lexicon, make_lexicon, token_spans

from conftest import TRAIN_DATA, make_examples

WORDS = ["北京", "北京市", "京市", "上海", "张三", "阿里巴巴", "巴巴", "工作", "员工", "广州", "深圳"]
FREQUENCIES = [50, 20, 1, 40, 3, 8, 2, 90, 30, 10, 10]
TAGS = ["ns", "ns", "", "ns", "nr", "nt", "n", "vn", "n", "ns", "ns"]
TEXTS = ["我在北京市工作", "", "张三去了上海。李四 ab", "腾讯总部在深圳"]


def reference_features(lexicon: Lexicon, text: str) -> numpy.ndarray:
    """The module docstring's formulas, one character and one word at a time."""
    types, word_types = lexicon.entity_types()
    rows = []
    for c in range(len(text)):
        weights = [0.0] * 4
        present = numpy.zeros((4, len(types)))
        for i, word in enumerate(lexicon.words):
            for start in range(len(text)):
                if text.startswith(word, start) and start <= c < start + len(word):
                    if len(word) == 1:
                        p = 3
                    elif c == start:
                        p = 0
                    elif c == start + len(word) - 1:
                        p = 2
                    else:
                        p = 1
                    frequency = 0 if lexicon.frequencies is None else lexicon.frequencies[i]
                    weights[p] += 1 + math.log1p(frequency) if lexicon.frequencies is not None else 1.0
                    present[p, 0] = 1
                    present[p, word_types[i]] = 1
        total = sum(weights)
        shares = [4 * w / total if total else 0.0 for w in weights]
        rows.append(numpy.concatenate([shares, present.ravel()]))
    return numpy.asarray(rows, dtype="float32").reshape(len(text), 4 + 4 * len(types))


@pytest.mark.parametrize("with_frequencies", [True, False])
@pytest.mark.parametrize("text", ["我在北京市工作", "李四是阿里巴巴的员工", "北京北京市巴巴", "", "没有词"])
def test_char_features_match_the_reference(text, with_frequencies):
    lexicon = Lexicon(WORDS + ["巴"], frequencies=(FREQUENCIES + [5]) if with_frequencies else None, tags=TAGS + ["n"])
    assert_allclose(char_features(lexicon, text), reference_features(lexicon, text), rtol=1e-6, atol=1e-6)


def reference_word_vectors(lexicon: Lexicon, text: str, rows: numpy.ndarray, vectors: numpy.ndarray) -> numpy.ndarray:
    """Eq. 10 of Ma et al. (2020) one character and one word at a time: per set, 4/Z sum z(w) e(w), Z over
    the four sets' words that have a vector."""
    out = numpy.zeros((len(text), 4, vectors.shape[1]))
    for c in range(len(text)):
        total = 0.0
        for i, word in enumerate(lexicon.words):
            if rows[i] < 0:
                continue
            for start in range(len(text)):
                if text.startswith(word, start) and start <= c < start + len(word):
                    p = 3 if len(word) == 1 else 0 if c == start else 2 if c == start + len(word) - 1 else 1
                    z = 1.0 if lexicon.frequencies is None else 1 + math.log1p(lexicon.frequencies[i])
                    out[c, p] += z * vectors[rows[i]]
                    total += z
        if total:
            out[c] *= 4 / total
    return out.reshape(len(text), 4 * vectors.shape[1]).astype("float32")


@pytest.mark.parametrize("with_frequencies", [True, False])
@pytest.mark.parametrize("text", ["我在北京市工作", "李四是阿里巴巴的员工", "北京北京市巴巴", "", "没有词"])
def test_word_vectors_match_the_reference(text, with_frequencies):
    from spacy_cner.layers.soft_lexicon import char_word_vectors

    lexicon = Lexicon(WORDS + ["巴"], frequencies=(FREQUENCIES + [5]) if with_frequencies else None, tags=TAGS + ["n"])
    vectors = numpy.random.default_rng(0).normal(size=(7, 3)).astype("float32")
    rows = numpy.asarray([0, 1, -1, 2, 3, 4, -1, 5, -1, 6, 0, 2], dtype="int64")  # 京市, 巴巴, 员工: none
    assert_allclose(
        char_word_vectors(lexicon, text, rows, vectors),
        reference_word_vectors(lexicon, text, rows, vectors),
        rtol=1e-5,
        atol=1e-6,
    )


def test_v2_reads_word_vectors_from_the_pipeline_and_refuses_a_pipeline_without(tmp_path):
    """SoftLexicon.v2's word vectors come from the docs' vocab vectors (the words' texts); v2 without
    word_vectors gives v1's features; with word_vectors and no vectors, initialize says what to set."""
    from spacy.vectors import Vectors

    from spacy_cner.layers.lexicon_slot import set_lexicon
    from spacy_cner.layers.soft_lexicon import SoftLexicon, SoftLexicon_v2, char_word_vectors

    lexicon = Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS)
    nlp = spacy.blank("zh")
    data = numpy.random.default_rng(1).normal(size=(3, 5)).astype("float32")
    nlp.vocab.vectors = Vectors(
        strings=nlp.vocab.strings, data=data, keys=[nlp.vocab.strings.add(w) for w in ("北京市", "上海", "工作")]
    )
    docs = [nlp.make_doc(text) for text in TEXTS]
    plain, with_vectors = SoftLexicon(), SoftLexicon_v2(word_vectors=True)
    for model in (plain, with_vectors):
        set_lexicon(model, lexicon)
        model.initialize(X=docs)
    assert with_vectors.get_dim("nO") == plain.get_dim("nO") + 4 * 5
    rows = numpy.asarray([{"北京市": 0, "上海": 1, "工作": 2}.get(w, -1) for w in WORDS])
    for doc, base, full in zip(docs, plain.predict(docs), with_vectors.predict(docs)):
        assert_allclose(full[:, : base.shape[1]], base)
        text = doc.text
        expected = char_word_vectors(lexicon, text, rows, data)
        spans = token_spans(doc)
        per_token = [expected[a:b].mean(axis=0) if b > a else numpy.zeros(20) for a, b in spans]
        assert_allclose(full[:, base.shape[1] :], numpy.asarray(per_token).reshape(-1, 20), rtol=1e-5, atol=1e-6)
    # Projected on their 2 principal directions: the same sums of the projected vectors, P saved with the layer.
    from spacy_cner.layers.soft_lexicon import principal_directions

    narrow = SoftLexicon_v2(word_vectors=True, vector_width=2)
    set_lexicon(narrow, lexicon)
    narrow.initialize(X=docs)
    projection = principal_directions(data, 2)
    assert_allclose(narrow.get_param("P"), projection)
    assert narrow.get_dim("nO") == plain.get_dim("nO") + 4 * 2
    u, sv, vt = numpy.linalg.svd(data.astype("float64"), full_matrices=False)
    assert_allclose(numpy.abs(projection), numpy.abs(vt[:2].T), atol=1e-6)  # up to each direction's sign
    for doc, base, full in zip(docs, plain.predict(docs), narrow.predict(docs)):
        expected = char_word_vectors(lexicon, doc.text, rows, data @ projection)
        per_token = [expected[a:b].mean(axis=0) if b > a else numpy.zeros(8) for a, b in token_spans(doc)]
        assert_allclose(full[:, base.shape[1] :], numpy.asarray(per_token).reshape(-1, 8), rtol=1e-5, atol=1e-6)
    restored = SoftLexicon_v2(word_vectors=True, vector_width=2).from_bytes(narrow.to_bytes())
    assert_allclose(restored.get_param("P"), projection)
    with pytest.raises(ValueError, match="vector_width"):
        SoftLexicon_v2(vector_width=2)
    bare = SoftLexicon_v2(word_vectors=True)
    set_lexicon(bare, lexicon)
    with pytest.raises(ValueError, match="no \\(non-floret\\) vectors of words"):
        bare.initialize(X=[spacy.blank("zh").make_doc("北京")])


def test_types_and_positions():
    lexicon = Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS)
    types, _ = lexicon.entity_types()
    assert types == ["", "LOC", "ORG", "PER"]
    features = char_features(lexicon, "张三在北京市")
    present = features[:, 4:].reshape(6, len(POSITIONS), len(types))
    assert present[0, POSITIONS.index("B"), types.index("PER")] == 1  # 张 begins 张三 (nr)
    assert present[1, POSITIONS.index("E"), types.index("PER")] == 1
    assert present[2].sum() == 0 and features[2, :4].sum() == 0  # 在: no word
    # 市 ends 北京市 (ns) and 京市 (no tag): E of any word and E of a LOC, no other position.
    assert present[5, POSITIONS.index("E"), 0] == 1 and present[5, POSITIONS.index("E"), types.index("LOC")] == 1
    assert features[5, :4].tolist() == [0, 0, 4, 0]


def test_softword_follows_jieba():
    jieba = pytest.importorskip("jieba", reason="softword needs jieba (the test extra installs it)")
    text = "张三在北京市工作。 李四"
    positions = softword_positions(text)
    expected = []
    for word in jieba.cut(text):
        expected += ["S"] if len(word) == 1 else ["B"] + ["M"] * (len(word) - 2) + ["E"]
    assert [POSITIONS[i] for i in positions.argmax(axis=1)] == expected
    assert (positions.sum(axis=1) == 1).all()


def test_softword_loads_jiebas_dictionary_without_printing():
    """jieba logs its dictionary loading on stderr at DEBUG level; softword loads it quietly."""
    pytest.importorskip("jieba", reason="softword needs jieba (the test extra installs it)")
    code = (
        "import logging, jieba\n"
        "from spacy_cner.layers.soft_lexicon import softword_positions\n"
        "assert softword_positions('北京欢迎你 㐀㐀').shape == (8, 4)  # rare Han: segmented by jieba itself\n"
        "assert jieba.dt.initialized and jieba.default_logger.level == logging.DEBUG\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Prefix dict" not in result.stderr and "Loading model" not in result.stderr


def test_word_tokens_get_the_mean_of_their_characters():
    lexicon = Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS)
    text = "我在北京市 工作"
    spans = [(0, 1), (1, 2), (2, 5), (0, 0), (6, 8)]
    per_char = char_features(lexicon, text)
    features = token_features(lexicon, text, spans, softword=False)
    assert_allclose(features[2], per_char[2:5].mean(axis=0))
    assert_allclose(features[4], per_char[6:8].mean(axis=0))
    assert (features[3] == 0).all()


def test_word_list_tags_gazetteers_and_bytes(tmp_path):
    word_list = tmp_path / "words.txt"
    word_list.write_text("北京 50 ns\n张三 3 nr\n工作 90 vn\n", encoding="utf8")
    gazetteer = tmp_path / "gazetteer.txt"
    gazetteer.write_text("张三\tPER\n阿里巴巴\tORG\n淘宝\tBRAND\n", encoding="utf8")
    lexicon = make_lexicon(str(word_list), gazetteers=[str(gazetteer)])
    assert lexicon.words == ["北京", "张三", "工作", "阿里巴巴", "淘宝"]
    assert lexicon.tags == ["ns", "PER", "vn", "ORG", "BRAND"]
    assert lexicon.frequencies.tolist() == [50, 3, 90, 0, 0]
    assert lexicon.entity_types()[0] == ["", "BRAND", "LOC", "ORG", "PER"]
    loaded = Lexicon.from_bytes(lexicon.to_bytes())
    assert (loaded.words, loaded.tags, loaded.frequencies.tolist()) == (lexicon.words, lexicon.tags, [50, 3, 90, 0, 0])
    bad = tmp_path / "bad.txt"
    bad.write_text("淘宝\tbrand\n", encoding="utf8")
    with pytest.raises(ValueError, match="part-of-speech"):
        make_lexicon(str(word_list), gazetteers=[str(bad)])
    bad.write_text("淘宝\n", encoding="utf8")
    with pytest.raises(ValueError, match="without a label"):
        make_lexicon(str(word_list), gazetteers=[str(bad)])


SOFT_TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "char_rows": 200,
    "bigram_rows": 300,
    "dropout": 0.0,
    "bigram_dropout": 0.0,
    "soft_lexicon": {"@layers": "spacy-cner.SoftLexicon.v1", "softword": False},
}


def make_nlp(lexicon=None):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": SOFT_TOK2VEC, "encoder": None}
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = make_examples(nlp, TRAIN_DATA[:4])
    nlp.get_pipe("crf_ner").initialize(lambda: examples, nlp=nlp, lexicon=lexicon)
    return nlp, examples


def entities(nlp, texts=TEXTS):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in nlp.pipe(texts)]


def test_pipeline_trains_saves_and_loads_its_lexicon(tmp_path):
    nlp, examples = make_nlp(Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS))
    optimizer = nlp.resume_training()
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    # The features reach the model: another lexicon changes the emissions.
    pipe = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc("李四是阿里巴巴的员工")
    before = pipe.model.predict([doc])[0].copy()
    nlp.to_disk(tmp_path / "model")
    layer = next(node for node in pipe.model.walk() if node.name == "soft_lexicon")
    from spacy_cner.layers.lexicon_slot import set_lexicon

    set_lexicon(layer, Lexicon(["员工", "上海", "张三"], frequencies=[1, 1, 1], tags=["nt", "ns", "nr"]))
    assert not numpy.allclose(pipe.model.predict([doc])[0], before)
    set_lexicon(layer, Lexicon(["员工"], frequencies=[1], tags=["nt"]))
    with pytest.raises(ValueError, match="other gazetteer types"):
        pipe.model.predict([doc])
    loaded = spacy.load(tmp_path / "model")
    assert entities(loaded) == entities(spacy.load(tmp_path / "model"))
    assert_allclose(loaded.get_pipe("crf_ner").model.predict([loaded.make_doc(doc.text)])[0], before, rtol=1e-5)
    saved = next(node for node in loaded.get_pipe("crf_ner").model.walk() if node.name == "soft_lexicon")
    assert saved.attrs["lexicon"].lexicon.tags == TAGS


def test_pipeline_without_a_lexicon_says_how_to_set_one():
    with pytest.raises(ValueError, match="initialize.components.crf_ner.lexicon"):
        make_nlp(None)


def test_a_batch_gives_each_doc_its_own_features():
    pytest.importorskip("jieba", reason="softword needs jieba (the test extra installs it)")
    from spacy_cner.layers.soft_lexicon import batch_features

    lexicon = Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS)
    texts = ["我在北京", "市工作", "", "张三 在 阿里巴巴", "北京市"]
    spans = [[(i, i + 1) for i in range(len(text)) if not text[i].isspace()] for text in texts]
    spans[3] = [(0, 2), (2, 2), (3, 4), (4, 4), (5, 9)]  # words and whitespace
    batch = batch_features(lexicon, texts, spans, softword=True)
    for text, doc_spans, features in zip(texts, spans, batch):
        assert_allclose(features, token_features(lexicon, text, doc_spans, softword=True))
    # "北京" at the end of one doc and "市" at the start of the next do not make 北京市.
    assert batch[0][3, :4].tolist() == [0, 0, 4, 0]


def test_a_repeated_batch_reuses_its_features(monkeypatch):
    """The adversarial pass of an update reads the same docs again: their features are computed once."""
    import copy

    from spacy.tokens import Doc

    from spacy_cner.layers import soft_lexicon
    from spacy_cner.layers.lexicon_slot import set_lexicon

    nlp, _ = make_nlp(Lexicon(WORDS, frequencies=FREQUENCIES, tags=TAGS))
    layer = next(node for node in nlp.get_pipe("crf_ner").model.walk() if node.name == "soft_lexicon")
    computed = []
    compute = soft_lexicon.batch_features
    monkeypatch.setattr(soft_lexicon, "batch_features", lambda *args: computed.append(args[1]) or compute(*args))
    first, _ = layer([nlp.make_doc(text) for text in TEXTS], is_train=True)
    again, _ = layer([nlp.make_doc(text) for text in TEXTS], is_train=True)
    assert len(computed) == 1
    for features, reused in zip(first, again):
        assert_allclose(reused, features)
    # Other texts, the same text in other tokens, or another lexicon: computed afresh.
    layer([nlp.make_doc(text) for text in TEXTS[:2]], is_train=False)
    words = layer([Doc(nlp.vocab, words=["我在", "北京市", "工作"], spaces=[False] * 3)], is_train=False)[0]
    assert len(computed) == 3 and words[0].shape[0] == 3
    set_lexicon(layer, Lexicon(["员工", "上海", "张三"], frequencies=[1, 1, 1], tags=["nt", "ns", "nr"]))
    layer([nlp.make_doc(text) for text in TEXTS], is_train=False)
    assert len(computed) == 4
    # Copies and pickles start without it.
    lexicon, docs = layer.attrs["lexicon"].lexicon, [nlp.make_doc(text) for text in TEXTS]
    spans = [token_spans(doc) for doc in docs]
    assert len(computed) == 4
    layer.attrs["last_batch"].features(lexicon, TEXTS, spans, lambda: computed.append("again") or [])
    assert len(computed) == 4
    copy.deepcopy(layer.attrs["last_batch"]).features(lexicon, TEXTS, spans, lambda: computed.append("copy") or [])
    assert computed[-1] == "copy"


def test_word_vector_rows_follow_the_lexicon_and_table_objects_not_their_ids():
    """The rows cache compares the lexicon and the vectors themselves (an id can be reused by a new object), and
    the table is read on the CPU whatever array the vectors hold (cupy on a GPU: an array with .get())."""
    from spacy.vectors import Vectors

    from spacy_cner.layers.soft_lexicon import WordVectorRows, _to_numpy

    nlp = spacy.blank("zh")
    data = numpy.arange(6, dtype="float32").reshape(2, 3)
    vectors = Vectors(strings=nlp.vocab.strings, data=data, keys=[nlp.vocab.strings.add(w) for w in ("北京", "上海")])
    cache = WordVectorRows()
    first = cache.rows(Lexicon(["北京", "深圳"]), vectors).tolist()
    second = cache.rows(Lexicon(["深圳", "上海"]), vectors).tolist()
    assert first == [0, -1] and second == [-1, 1]
    assert_allclose(cache.table(vectors, numpy.eye(3, 2)), data[:, :2])
    assert_allclose(cache.table(vectors), data)

    class DeviceArray:  # what cupy's arrays offer for a copy to the host
        def get(self):
            return data

    assert_allclose(_to_numpy(DeviceArray()), data)
