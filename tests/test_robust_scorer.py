"""spacy-cner.robust_ner_scorer.v1: R-F1 in the dev scores, and model selection on it in `spacy train`."""
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import load_config, registry

from conftest import CONTEXT_GOLD, CONTEXT_TEXTS

REPO_ROOT = Path(__file__).resolve().parents[1]
ROBUST_SCORER = {"@scorers": "spacy-cner.robust_ner_scorer.v1"}
TRAIN_DATA = [
    ("我在北京市工作", [(2, 5, "LOC")]),
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四是阿里巴巴的员工", [(0, 2, "PER"), (3, 7, "ORG")]),
]


def examples_of(nlp, texts, gold):
    return [Example(nlp(text), Example.from_dict(nlp.make_doc(text), {"entities": e}).reference)
            for text, e in zip(texts, gold)]


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
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN_DATA]
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


def test_spacy_train_reports_and_weights_robust_f(tmp_path):
    from spacy.cli.train import train as spacy_train

    nlp = spacy.blank("zh")
    docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in TRAIN_DATA]
    DocBin(docs=docs).to_disk(tmp_path / "data.spacy")
    config = load_config(REPO_ROOT / "configs" / "default.cfg")
    config["components"]["crf_ner"]["scorer"] = ROBUST_SCORER
    config["training"]["score_weights"] = {"ents_f": 0.0, "ents_robust_f": 1.0, "ents_asr": None}
    config.to_disk(tmp_path / "config.cfg")
    overrides = {
        "paths.train": str(tmp_path / "data.spacy"),
        "paths.dev": str(tmp_path / "data.spacy"),
        "training.max_steps": 20,
        "training.eval_frequency": 10,
    }
    spacy_train(tmp_path / "config.cfg", tmp_path / "output", overrides=overrides)
    performance = srsly.read_json(tmp_path / "output" / "model-best" / "meta.json")["performance"]
    assert 0.0 <= performance["ents_robust_f"] <= 1.0
    assert "ents_asr" in performance
    assert spacy.load(tmp_path / "output" / "model-best").config["training"]["score_weights"]["ents_robust_f"] == 1.0
