"""CRFTagger(sentence_encoding=True): each sentence encoded on its own, the whole doc decoded;
"predict": whole docs in training, each sentence on its own when predicting."""

import numpy
import pytest
import spacy
from thinc.api import fix_random_seed

from conftest import make_examples

# Not the shared toy corpus: these texts need sentence ends (。！) inside them, and an entity right after one.
SENTENCE_DATA = [
    ("张三去了上海。", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("我在北京市工作！李四在深圳", [(2, 5, "LOC"), (8, 10, "PER"), (11, 13, "LOC")]),
]
TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "embed_width": 8,
    "char_rows": 200,
    "bigram_rows": 200,
    "sentence_bigrams": True,
}
ENCODERS = {
    "bilstm": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 16},
    "tener": {"@layers": "spacy-cner.TENEREncoder.v1", "n_heads": 2, "head_width": 8, "ffn_width": 16},
}


def make_nlp(encoder: str, sentence_encoding: bool) -> spacy.Language:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": TOK2VEC,
        "encoder": ENCODERS[encoder],
        "sentence_encoding": sentence_encoding,
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = make_examples(nlp, SENTENCE_DATA)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(120):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    return nlp


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_a_sentence_gets_the_same_scores_alone_and_after_another(encoder):
    first, second = "我在北京市工作！", "张三去了上海。"
    for sentence_encoding in (True, False):
        nlp = make_nlp(encoder, sentence_encoding)
        model = nlp.get_pipe("crf_ner").model
        joined, alone_first, alone_second = model.predict([nlp.make_doc(t) for t in (first + second, first, second)])
        same = numpy.allclose(joined[len(first) :], alone_second, atol=1e-5)
        assert same == sentence_encoding
        assert numpy.allclose(joined[: len(first)], alone_first, atol=1e-5) == sentence_encoding


def test_it_learns_and_saves(tmp_path):
    nlp = make_nlp("bilstm", True)
    examples = make_examples(nlp, SENTENCE_DATA)
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    nlp.to_disk(tmp_path)
    loaded = spacy.load(tmp_path)
    assert loaded.get_pipe("crf_ner").model.attrs["sentence_encoding"] is True
    texts = [t for t, _ in SENTENCE_DATA] + ["", "。", "王五。"]

    def ents(docs):
        return [[(e.start, e.end, e.label_) for e in d.ents] for d in docs]

    assert ents(loaded.pipe(texts)) == ents(nlp.pipe(texts))


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_predict_reads_each_sentence_alone_only_when_predicting(encoder, tmp_path):
    """sentence_encoding "predict": training's forward pass reads the joined doc whole (a sentence's
    vectors depend on its neighbour), predict reads each sentence alone (the same scores as alone)."""
    first, second = "我在北京市工作！", "张三去了上海。"
    nlp = make_nlp(encoder, "predict")
    model = nlp.get_pipe("crf_ner").model
    docs = [nlp.make_doc(t) for t in (first + second, first, second)]
    joined, alone_first, alone_second = model.predict(docs)
    assert numpy.allclose(joined[len(first) :], alone_second, atol=1e-5)
    assert numpy.allclose(joined[: len(first)], alone_first, atol=1e-5)
    # A batch without a sentence cut takes the encoder's whole-doc path: the same scores.
    numpy.testing.assert_allclose(model.predict(docs[1:])[1], alone_second, atol=1e-6)
    trained, _ = model(docs, is_train=True)
    assert not numpy.allclose(trained[0][len(first) :], trained[2], atol=1e-5)
    assert nlp.evaluate(make_examples(nlp, SENTENCE_DATA))["ents_f"] == 1.0
    nlp.to_disk(tmp_path)
    assert spacy.load(tmp_path).get_pipe("crf_ner").model.attrs["sentence_encoding"] == "predict"


@pytest.mark.parametrize("value", [True, "predict"])
def test_needs_an_encoder(value):
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": TOK2VEC,
        "encoder": None,
        "sentence_encoding": value,
    }
    with pytest.raises(ValueError, match="needs an encoder"):
        nlp.add_pipe("crf_ner", config={"model": model})


def test_an_unknown_value_is_refused():
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": TOK2VEC,
        "encoder": ENCODERS["bilstm"],
        "sentence_encoding": "train",
    }
    with pytest.raises(ValueError, match='sentence_encoding must be true, false or "predict"'):
        spacy.blank("zh").add_pipe("crf_ner", config={"model": model})


def test_entity_attention_per_sentence():
    """An entity-label enhancement gets each sentence's gold entity ids (cut as the vectors are)."""
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    tener = {**ENCODERS["tener"], "entity_attention_scale": 0.5}
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": TOK2VEC,
        "encoder": tener,
        "sentence_encoding": True,
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = make_examples(nlp, SENTENCE_DATA)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(120):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    assert nlp.evaluate(examples)["ents_f"] == 1.0


def test_a_transformer_tok2vec_reads_each_sentence_in_its_own_window(tiny_bert):
    first, second = "我在北京市工作！", "张三去了上海。"
    for sentence_encoding in (True, False):
        fix_random_seed(0)
        nlp = spacy.blank("zh")
        tok2vec = {"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(tiny_bert)}
        model = {
            "@architectures": "spacy-cner.CRFTagger.v1",
            "tok2vec": tok2vec,
            "encoder": None,
            "sentence_encoding": sentence_encoding,
        }
        nlp.add_pipe("crf_ner", config={"model": model})
        examples = make_examples(nlp, SENTENCE_DATA)
        nlp.initialize(lambda: examples)
        tagger = nlp.get_pipe("crf_ner").model
        assert tagger.get_ref("tok2vec").attrs.get("sentence_windows", False) == sentence_encoding
        joined, alone_first, alone_second = tagger.predict([nlp.make_doc(t) for t in (first + second, first, second)])
        assert numpy.allclose(joined[len(first) :], alone_second, atol=1e-5) == sentence_encoding
        assert numpy.allclose(joined[: len(first)], alone_first, atol=1e-5) == sentence_encoding
