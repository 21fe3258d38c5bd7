"""CharBigramEmbed: a token is embedded by itself and the bigrams around it."""

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import fix_random_seed

from spacy_cner.layers.char_bigram_embed import BOUNDARY, CharBigramEmbed, ngram_keys

WIDTH = 8


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("zh")


def make_model(prev_bigram=True):
    fix_random_seed(0)
    model = CharBigramEmbed(WIDTH, char_rows=100, bigram_rows=200, prev_bigram=prev_bigram)
    model.initialize()
    return model


def keys(docs, prev_bigram=True):
    return ngram_keys(prev_bigram).predict(docs)


def test_bigram_keys_depend_on_order(nlp):
    beijing, jingbei = keys([nlp.make_doc("北京"), nlp.make_doc("京北")])
    assert beijing.shape == (2, 3) and beijing.dtype == numpy.uint64
    # The same characters ...
    assert set(beijing[:, 0].tolist()) == set(jingbei[:, 0].tolist())
    # ... but the bigram 北京 is not the bigram 京北.
    assert beijing[0, 1] != jingbei[0, 1]
    assert beijing[1, 2] == beijing[0, 1]  # the next bigram of 北 is the previous bigram of 京
    assert not set(beijing[:, 1:].ravel().tolist()) & set(jingbei[:, 1:].ravel().tolist())
    assert keys([nlp.make_doc("北京")], prev_bigram=False)[0].shape == (2, 2)


def test_boundaries_differ_from_tokens(nlp):
    (one,) = keys([nlp.make_doc("京")])
    assert one[0, 1] != one[0, 2]  # (京, end) vs (start, 京)
    assert BOUNDARY not in one.ravel().tolist()


def test_same_char_different_context(nlp):
    model = make_model()
    beijing, beihai, nanjing = model.predict([nlp.make_doc(t) for t in ("北京", "北海", "南京")])
    assert not numpy.allclose(beijing[0], beihai[0])  # 北 before 京 vs before 海
    assert not numpy.allclose(beijing[1], nanjing[1])  # 京 after 北 vs after 南
    # Without the previous bigram, 京 at the end looks the same after 北 and 南.
    model = make_model(prev_bigram=False)
    beijing, nanjing = model.predict([nlp.make_doc(t) for t in ("北京", "南京")])
    numpy.testing.assert_allclose(beijing[1], nanjing[1], rtol=1e-6)
    assert not numpy.allclose(beijing[0], nanjing[0])


def test_same_context_same_vector(nlp):
    model = make_model()
    first, second = model.predict([nlp.make_doc("我爱北京"), nlp.make_doc("你爱北京")])
    numpy.testing.assert_allclose(first[2:], second[2:], rtol=1e-6)


def test_word_segmented_doc(nlp):
    model = make_model()
    doc = Doc(nlp.vocab, words=["北京", "是", "中国", "的", "首都"], spaces=[False] * 5)
    (vectors,) = model.predict([doc])
    assert vectors.shape == (5, WIDTH)
    assert numpy.isfinite(vectors).all()
    # A word is embedded as a word: 北京 the word is not 北 the character.
    (chars,) = model.predict([nlp.make_doc("北京")])
    assert not numpy.allclose(vectors[0], chars[0])


def test_empty_doc(nlp):
    model = make_model()
    Y, backprop = model.begin_update([nlp.make_doc(""), nlp.make_doc("上海")])
    assert [y.shape for y in Y] == [(0, WIDTH), (2, WIDTH)]
    backprop([numpy.ones_like(y) for y in Y])
    assert keys([nlp.make_doc("")])[0].shape == (0, 3)


def test_bigram_dropout_hides_bigrams_in_training_only():
    import spacy

    from spacy_cner.layers.char_bigram_embed import UNKNOWN_BIGRAM, ngram_keys

    fix_random_seed(0)
    doc = spacy.blank("zh")("北京大学光华管理学院的教授" * 4)
    model = ngram_keys(prev_bigram=True, bigram_dropout=0.5)
    (train_keys,), _ = model([doc], is_train=True)
    (predict_keys,), _ = model([doc], is_train=False)
    hidden = train_keys[:, 1:] == UNKNOWN_BIGRAM
    assert 0.2 < hidden.mean() < 0.8
    assert not (predict_keys == UNKNOWN_BIGRAM).any()
    # Characters are never hidden, and visible bigrams keep their keys.
    numpy.testing.assert_array_equal(train_keys[:, 0], predict_keys[:, 0])
    numpy.testing.assert_array_equal(train_keys[:, 1:][~hidden], predict_keys[:, 1:][~hidden])


def test_sentence_bigrams_give_each_sentence_its_features_alone(nlp):
    """With sentence_bigrams, 张三来了。李四走了 has the keys of its two sentences alone; without, not."""
    first, second, joined = (nlp.make_doc(text) for text in ("张三来了。", "李四走了", "张三来了。李四走了"))
    split = ngram_keys(True, sentence_bigrams=True)
    alone = split.predict([first, second])
    (together,) = split.predict([joined])
    numpy.testing.assert_array_equal(together, numpy.concatenate(alone))
    (crossing,) = ngram_keys(True).predict([joined])
    assert (crossing[4] != together[4]).any() and (crossing[5] != together[5]).any()
    numpy.testing.assert_array_equal(crossing[:4], together[:4])
    # Embeddings follow the keys: the second sentence's vectors are its vectors alone.
    fix_random_seed(0)
    model = CharBigramEmbed(WIDTH, char_rows=100, bigram_rows=200, sentence_bigrams=True)
    model.initialize()
    (vectors,) = model.predict([joined])
    numpy.testing.assert_allclose(vectors[5:], model.predict([second])[0], rtol=1e-6)


@pytest.mark.parametrize("prev_bigram,sentence_bigrams", [(True, True), (True, False), (False, True)])
def test_a_batch_gives_each_doc_its_keys_alone(nlp, prev_bigram, sentence_bigrams):
    """The keys are computed over the whole batch at once: each doc's are those it gets alone (empty
    docs, one-token docs and sentence ends included), and bigram dropout hides the same bigrams as
    one draw per doc in turn."""
    texts = ["", "张三来了。李四走了", "京", "", "我在北京工作。", "。上海！", "北京大学光华管理学院的教授"]
    docs = [nlp.make_doc(text) for text in texts]
    model = ngram_keys(prev_bigram, bigram_dropout=0.5, sentence_bigrams=sentence_bigrams)
    for is_train in (False, True):
        numpy.random.seed(3)
        batch, _ = model(docs, is_train)
        numpy.random.seed(3)
        alone = [model([doc], is_train)[0][0] for doc in docs]
        assert [keys.shape for keys in batch] == [(len(doc), 3 if prev_bigram else 2) for doc in docs]
        for doc_keys, doc_alone in zip(batch, alone):
            numpy.testing.assert_array_equal(doc_keys, doc_alone)
    numpy.random.seed(3)
    (hidden,), _ = model([docs[-1]], True)
    assert (hidden[:, 1:] != model.predict([docs[-1]])[0][:, 1:]).any()  # dropout did hide bigrams
    assert model.predict([nlp.make_doc(""), nlp.make_doc("")])[0].shape == (0, 3 if prev_bigram else 2)
