"""Pretrained character and bigram vectors: CharBigramEmbed(static_vectors=True), from `spacy init vectors`."""
import subprocess
import sys

import numpy
import pytest
import spacy
from spacy.training import Example
from spacy.util import load_config, load_model_from_config
from thinc.api import fix_random_seed

from spacy_cner.layers.char_bigram_embed import ngram_vectors

from conftest import REPO_ROOT

TRAIN_DATA = [("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("我在北京市工作", [(2, 5, "LOC")])]
# word2vec text: characters and bigrams, as Lattice-LSTM's uni + bi files joined.
WORDS = {"张": 1.0, "三": 2.0, "上": 3.0, "海": 4.0, "张三": 5.0, "上海": 6.0, "三去": 7.0}


def write_vectors(path, width=4):
    lines = [f"{len(WORDS)} {width}"] + [f"{w} " + " ".join([str(v)] * width) for w, v in WORDS.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


@pytest.fixture
def vectors_model(tmp_path):
    text = write_vectors(tmp_path / "vectors.txt")
    subprocess.run([sys.executable, "-m", "spacy", "init", "vectors", "zh", str(text), str(tmp_path / "vectors")],
                   check=True, capture_output=True)
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


def config(vectors, static_vectors=True):
    overrides = {
        "paths.vectors": str(vectors) if vectors else None,
        "components.crf_ner.model.tok2vec.static_vectors": static_vectors,
        "components.crf_ner.model.tok2vec.width": 16,
        "components.crf_ner.model.encoder.width": 16,
    }
    return load_config(REPO_ROOT / "configs" / "default.cfg", overrides=overrides, interpolate=True)


def initialized(vectors, static_vectors=True):
    fix_random_seed(0)
    nlp = load_model_from_config(config(vectors, static_vectors), auto_fill=True)
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN_DATA]
    nlp.initialize(lambda: examples)
    return nlp, examples


def test_default_config_with_vectors_trains_saves_and_keeps_them_frozen(vectors_model, tmp_path):
    nlp, examples = initialized(vectors_model)
    assert nlp.vocab.vectors.n_keys == len(WORDS)
    before = nlp.vocab.vectors.data.copy()
    optimizer = nlp.create_optimizer()
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    numpy.testing.assert_array_equal(nlp.vocab.vectors.data, before)
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    ents = lambda doc: [(e.start_char, e.end_char, e.label_) for e in doc.ents]
    assert ents(loaded("张三去了上海")) == ents(nlp("张三去了上海"))
    # The vectors reach the output: other vectors, other emission scores.
    ner = loaded.get_pipe("crf_ner")
    doc = loaded.make_doc("张三去了上海")
    scores = ner.model.predict([doc])[0].copy()
    loaded.vocab.set_vector("张", numpy.full((4,), 50.0, dtype="f"))
    assert not numpy.allclose(ner.model.predict([doc])[0], scores)


def test_vectors_without_the_option_raise(vectors_model):
    with pytest.raises(ValueError, match="no component reads them.*static_vectors"):
        initialized(vectors_model, static_vectors=False)


def test_the_option_without_vectors_raises():
    with pytest.raises(ValueError, match="static_vectors = true but the pipeline has no vectors"):
        initialized(None, static_vectors=True)
