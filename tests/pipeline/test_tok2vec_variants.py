"""CRFTagger takes any spaCy tok2vec: spaCy's own Tok2Vec, or a listener to a shared tok2vec."""

import numpy
import pytest
import spacy
from thinc.api import fix_random_seed

from conftest import TRAIN_DATA, make_examples

SPACY_TOK2VEC = {
    "@architectures": "spacy.Tok2Vec.v2",
    "embed": {
        "@architectures": "spacy.MultiHashEmbed.v2",
        "width": 32,
        "attrs": ["ORTH", "NORM"],
        "rows": [500, 500],
        "include_static_vectors": False,
    },
    "encode": {
        "@architectures": "spacy.MaxoutWindowEncoder.v2",
        "width": 32,
        "depth": 2,
        "window_size": 1,
        "maxout_pieces": 3,
    },
}


def overfit(nlp: spacy.Language) -> float:
    examples = make_examples(nlp, TRAIN_DATA[:3])
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    return nlp.evaluate(examples)["ents_f"]


def test_spacy_tok2vec_without_encoder():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": SPACY_TOK2VEC, "encoder": None}
    nlp.add_pipe("crf_ner", config={"model": model})
    assert overfit(nlp) == 1.0


def test_listener_to_shared_tok2vec(tmp_path):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("tok2vec", config={"model": SPACY_TOK2VEC})
    listener = {"@architectures": "spacy.Tok2VecListener.v1", "width": 32, "upstream": "*"}
    encoder = {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0}
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": listener, "encoder": encoder}
    nlp.add_pipe("crf_ner", config={"model": model})
    assert overfit(nlp) == 1.0
    assert nlp.get_pipe("tok2vec").listening_components == ["crf_ner"]
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    text = "张三去了北京市"
    assert [(e.text, e.label_) for e in loaded(text).ents] == [(e.text, e.label_) for e in nlp(text).ents]


def test_spacy_transformers_listener(tiny_bert):
    """A spacy-transformers `transformer` component feeds crf_ner through its listener."""
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    transformer = {
        "@architectures": "spacy-transformers.TransformerModel.v3",
        "name": str(tiny_bert),
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 32, "stride": 24},
    }
    nlp.add_pipe("transformer", config={"model": transformer})
    listener = {
        "@architectures": "spacy-transformers.TransformerListener.v1",
        "grad_factor": 1.0,
        "pooling": {"@layers": "reduce_mean.v1"},
        "upstream": "*",
    }
    encoder = {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0}
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": listener, "encoder": encoder}
    nlp.add_pipe("crf_ner", config={"model": model})
    assert overfit(nlp) == 1.0
    assert nlp.get_pipe("transformer").listening_components == ["crf_ner"]


def add_vectors(nlp: spacy.Language) -> None:
    for i, char in enumerate("我在北京市工作张三"):
        nlp.vocab.set_vector(char, numpy.full((8,), i, dtype="f"))


def test_vectors_no_component_reads_raise():
    """[initialize] vectors with a model that cannot use them: an error, not a silent no-op."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner")
    add_vectors(nlp)
    with pytest.raises(ValueError, match="9 vectors of width 8.*no component reads them"):
        nlp.initialize(lambda: make_examples(nlp, TRAIN_DATA[:3]))


def test_vectors_read_by_a_static_vectors_tok2vec():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    tok2vec = {**SPACY_TOK2VEC, "embed": {**SPACY_TOK2VEC["embed"], "include_static_vectors": True}}
    nlp.add_pipe(
        "crf_ner", config={"model": {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": None}}
    )
    add_vectors(nlp)
    assert overfit(nlp) == 1.0
