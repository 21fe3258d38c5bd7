"""The full transformer config (NEZHA-BiLSTM-CRF + DF + AT) overfits with tiny local models, saves and
loads (`spacy train` on every transformer config: tests/integration/test_spacy_train.py)."""

import pytest
import spacy
from spacy.util import load_config, load_model_from_config
from thinc.api import Adam, fix_random_seed

from conftest import REPO_ROOT, TRAIN_DATA, make_examples

TEXTS = ["我在北京市工作", "", "张三去了上海。李四 ab", "腾讯总部在深圳"]


@pytest.fixture(scope="module", params=["bert", "nezha"])
def overfit(request, tmp_path_factory):
    """The full model (+DF +AT) with a tiny BERT or NEZHA, overfit to four sentences."""
    model_path = request.getfixturevalue(f"tiny_{request.param}")
    overrides = {
        "vars.transformer": str(model_path),
        "training.dropout": 0.0,
        "components.crf_ner.model.encoder.width": 32,
        "components.crf_ner.model.encoder.dropout": 0.0,
    }
    config = load_config(REPO_ROOT / "configs" / "nezha_bilstm_crf_df_at.cfg", overrides=overrides, interpolate=True)
    fix_random_seed(0)
    nlp = load_model_from_config(config, auto_fill=True)
    examples = make_examples(nlp, TRAIN_DATA[:4])
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.002)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    path = tmp_path_factory.mktemp("overfit") / request.param
    nlp.to_disk(path)
    return nlp, examples, path


def entities(docs):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in docs]


def test_overfits(overfit):
    nlp, examples, _ = overfit
    assert nlp.evaluate(examples)["ents_f"] == 1.0


def test_saved_pipeline_predicts_the_same_and_records_the_mix(overfit):
    nlp, _, path = overfit
    loaded = spacy.load(path)
    assert entities(loaded.pipe(TEXTS)) == entities(nlp.pipe(TEXTS))
    weights = loaded.get_pipe("crf_ner").scalar_mix_weights()
    assert len(weights["weights"]) == 3 and sum(weights["weights"]) == pytest.approx(1.0)
    # Trained: no longer the uniform start.
    assert weights["weights"] != pytest.approx([1 / 3] * 3)
    saved_cfg = spacy.util.srsly.read_json(path / "crf_ner" / "cfg")
    assert saved_cfg["scalar_mix"]["weights"] == pytest.approx(weights["weights"])
