"""spacy-cner.robust_ner_scorer.v1: R-F1 in the dev scores (model selection on it in `spacy train`:
tests/integration/test_spacy_train.py)."""

import pytest
import spacy
from spacy.training import Example
from spacy.util import registry

from conftest import CONTEXT_GOLD, CONTEXT_TEXTS, TRAIN_DATA, make_examples

ROBUST_SCORER = {"@scorers": "spacy-cner.robust_ner_scorer.v1"}


def examples_of(nlp, texts, gold):
    return [
        Example(nlp(text), Example.from_dict(nlp.make_doc(text), {"entities": e}).reference)
        for text, e in zip(texts, gold)
    ]


def test_scores_a_context_sensitive_pipeline():
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_context_sensitive_ner")
    scorer = registry.resolve({"s": ROBUST_SCORER})["s"]
    scores = scorer(examples_of(nlp, CONTEXT_TEXTS, CONTEXT_GOLD), nlp=nlp)
    # Alone: 深圳特区 GPE (gold ORG), 张三 PER, 深圳特区 GPE: 2 of 3 right.
    assert scores["ents_f"] == pytest.approx(2 / 3)
    # Pair (1, 2) turns 深圳特区 into ORG: 3 of the 4 entities of the pairs kept.
    assert scores["ents_robust_p"] == scores["ents_robust_r"] == pytest.approx(0.75)
    assert scores["ents_robust_f"] == pytest.approx(0.75)
    assert scores["ents_robust_per_type"]["PER"]["f"] == 1.0
    assert scores["ents_robust_per_type"]["GPE"]["r"] == 0.5
    # Against gold the pairs get 张三 twice and 深圳特区 never: 2 of 4.
    assert scores["ents_perturbed_f"] == pytest.approx(0.5)
    assert scores["ents_asr"] == pytest.approx(4 / (10 + 8))


def test_scores_a_context_blind_pipeline():
    nlp = spacy.blank("zh")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "PER", "pattern": "张三"}, {"label": "LOC", "pattern": "上海"}])
    texts = ["张三去了上海", "我在上海", "张三"]
    gold = [[(0, 2, "PER"), (4, 6, "LOC")], [(2, 4, "LOC")], [(0, 2, "PER")]]
    scorer = registry.resolve({"s": {**ROBUST_SCORER, "pairing": "random", "seed": 3}})["s"]
    scores = scorer(examples_of(nlp, texts, gold), nlp=nlp)
    assert scores["ents_f"] == scores["ents_robust_f"] == scores["ents_perturbed_f"] == 1.0
    assert scores["ents_asr"] == 0.0


def test_unknown_pairing_fails_at_config_time():
    with pytest.raises(ValueError, match="Unknown pairing 'neighbours'"):
        registry.resolve({"s": {**ROBUST_SCORER, "pairing": "neighbours"}})


def test_crf_ner_gives_the_scorer_its_pipeline():
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"scorer": ROBUST_SCORER})
    examples = make_examples(nlp, TRAIN_DATA[:3])
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    scores = nlp.evaluate(examples)
    # Scores of a trained model, not defaults: an untrained CRF gets no pair right.
    assert scores["ents_f"] == 1.0
    assert 0.5 < scores["ents_robust_f"] <= 1.0
    assert 0.0 <= scores["ents_asr"] < 0.5
    assert set(scores["ents_robust_per_type"]) <= {"LOC", "PER", "ORG"}


def test_a_pipe_outside_its_pipeline_fails_clearly():
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("crf_ner", config={"scorer": ROBUST_SCORER})
    nlp.remove_pipe("crf_ner")
    with pytest.raises(ValueError, match="not in the pipeline it was created or initialized in"):
        ner.score([])
    del ner.pipeline_link  # as a pipe pickled before the link existed
    with pytest.raises(ValueError, match="not in the pipeline it was created or initialized in"):
        ner.score([])
