"""Every config in configs/ takes blank and control-only texts: alone, in nlp.pipe batches, in training."""

import math

import pytest
from conftest import CONFIG_NAMES, TRAIN_DATA, small_config_pipeline
from spacy.training import Example

# Texts a transformer tokenizer turns into no wordpieces at all (whitespace, joiners,
# control characters, the replacement character), and the empty text.
BLANK_TEXTS = [" ", "\n", "\u3000", "\u200d", "\x00", "\ufffd", "", " \n\u3000\x00 "]


def entities(doc):
    return [(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents]


@pytest.fixture(scope="module", params=CONFIG_NAMES)
def nlp(request):
    return small_config_pipeline(request.param, request)


def test_blank_texts_alone(nlp):
    for text in BLANK_TEXTS:
        doc = nlp(text)
        assert doc.text == text and len(doc) == len(nlp.make_doc(text))
        assert all(ent.text.strip() for ent in doc.ents), (text, entities(doc))


def test_blank_texts_in_batches(nlp):
    alone = [entities(nlp(text)) for text in BLANK_TEXTS + ["张三去了上海"]]
    only_blank = [entities(doc) for doc in nlp.pipe(BLANK_TEXTS, batch_size=len(BLANK_TEXTS))]
    assert only_blank == alone[:-1]
    mixed = [entities(doc) for doc in nlp.pipe(["张三去了上海"] + BLANK_TEXTS, batch_size=4)]
    assert mixed == alone[-1:] + alone[:-1]


def test_blank_texts_in_training(nlp):
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": []}) for t in BLANK_TEXTS]
    text, gold = TRAIN_DATA[1]  # two entities
    examples.append(Example.from_dict(nlp.make_doc(text), {"entities": gold}))
    losses = nlp.update(examples, drop=0.0)
    assert math.isfinite(losses["crf_ner"])
    blank_only = nlp.update(examples[:-1], drop=0.0)
    assert math.isfinite(blank_only["crf_ner"])


def test_entity_scores_in_every_config(nlp):
    """doc.spans["crf_ner"] holds the entities with probabilities, blank texts an empty group."""
    if nlp.get_pipe("crf_ner").spans_key is None:
        pytest.skip("the config computes no span probabilities (spans_key null: the student configs)")
    for doc in nlp.pipe(["张三去了上海，我在北京市工作", " ", ""]):
        group = doc.spans["crf_ner"]
        scores = group.attrs["scores"]
        assert len(scores) == len(group)
        assert ((scores >= 0) & (scores <= 1 + 1e-6)).all()
        assert {(e.start, e.end, e.label_) for e in doc.ents} <= {(s.start, s.end, s.label_) for s in group}
        assert all(s >= 0.1 for span, s in zip(group, scores) if span not in doc.ents)
