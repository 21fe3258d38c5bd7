"""crf_ner with the TENER encoder: configs/tener.cfg overfits, saves and loads (`spacy train` on it:
tests/integration/test_spacy_train.py)."""

import pytest
import spacy
from spacy.util import load_config
from thinc.api import fix_random_seed

from conftest import REPO_ROOT, SMALL_TENER, TENER_NO_DROPOUT, make_examples

TEXTS = ["我在北京市工作", "", "张三去了上海", "李四 在 阿里巴巴", "王五在深圳工作，腾讯总部在深圳。"]


def tener_model_config() -> dict:
    # Dropout off so that 60 steps overfit.
    config = load_config(REPO_ROOT / "configs" / "tener.cfg", overrides={**SMALL_TENER, **TENER_NO_DROPOUT})
    return dict(config["components"]["crf_ner"]["model"])


@pytest.fixture(scope="module")
def trained():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": tener_model_config()})
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    return nlp, examples


def ents(docs):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in docs]


def test_overfits(trained):
    nlp, examples = trained
    assert nlp.evaluate(examples)["ents_f"] == 1.0


def test_to_disk_and_load_give_identical_predictions(trained, tmp_path):
    nlp, _ = trained
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert ents(loaded.pipe(TEXTS)) == ents(nlp.pipe(TEXTS))
    assert ents(nlp.pipe(TEXTS, batch_size=2)) == ents(nlp(text) for text in TEXTS)
