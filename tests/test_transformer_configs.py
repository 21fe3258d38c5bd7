"""The transformer configs (BERT-CRF ... NEZHA-BiLSTM-CRF + DF + AT) train with tiny local models."""
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import load_config, load_model_from_config
from thinc.api import Adam, fix_random_seed

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAIN_DATA = [
    ("我在北京市工作", [(2, 5, "LOC")]),
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四是阿里巴巴的员工", [(0, 2, "PER"), (3, 7, "ORG")]),
    ("王五住在广州", [(0, 2, "PER"), (4, 6, "LOC")]),
]
TEXTS = ["我在北京市工作", "", "张三去了上海。李四 ab", "腾讯总部在深圳"]
# config: (tiny model, has BiLSTM, has scalar mix, adversarial)
CONFIGS = {
    "bert_crf": ("bert", False, False, False),
    "bert_bilstm_crf": ("bert", True, False, False),
    "nezha_bilstm_crf": ("nezha", True, False, False),
    "nezha_bilstm_crf_df": ("nezha", True, True, False),
    "nezha_bilstm_crf_df_at": ("nezha", True, True, True),
    # with the lexicon adapter after layer 1, jieba's dictionary (tests/test_lexicon_pipeline.py has more)
    "lebert": ("bert", False, False, False),
}


def write_corpus(path: Path) -> None:
    nlp = spacy.blank("zh")
    for name, data in (("train", TRAIN_DATA * 2), ("dev", TRAIN_DATA[:2])):
        docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in data]
        DocBin(docs=docs).to_disk(path / f"{name}.spacy")


def test_every_config_is_listed():
    found = {p.stem for p in (REPO_ROOT / "configs").glob("*.cfg")}
    assert set(CONFIGS) <= found
    for name in found - set(CONFIGS):
        assert "TransformerTok2Vec" not in (REPO_ROOT / "configs" / f"{name}.cfg").read_text(encoding="utf8")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_spacy_train(name, tmp_path, request):
    from spacy.cli.train import train as spacy_train

    kind, has_bilstm, has_mix, adversarial = CONFIGS[name]
    model_path = request.getfixturevalue(f"tiny_{kind}")
    write_corpus(tmp_path)
    overrides = {
        "vars.transformer": str(model_path),
        "paths.train": str(tmp_path / "train.spacy"),
        "paths.dev": str(tmp_path / "dev.spacy"),
        "training.max_steps": 6,
        "training.eval_frequency": 3,
        "training.optimizer.learn_rate.warmup_steps": 2,
        "training.batcher.size": 40,
    }
    spacy_train(REPO_ROOT / "configs" / f"{name}.cfg", tmp_path / "output", overrides=overrides)
    nlp = spacy.load(tmp_path / "output" / "model-best")
    ner = nlp.get_pipe("crf_ner")
    assert ner.model.has_ref("encoder") == has_bilstm
    assert (ner.scalar_mix_weights() is not None) == has_mix
    assert (ner.adversarial is not None) == adversarial
    assert ner.cfg["tok2vec_learn_rate_scale"] == 0.5
    assert [len(doc) for doc in nlp.pipe(TEXTS)] == [len(nlp.make_doc(t)) for t in TEXTS]


@pytest.fixture(scope="module", params=["bert", "nezha"])
def overfit(request, tmp_path_factory):
    """The full model (+DF +AT) with a tiny BERT or NEZHA, overfit to four sentences."""
    model_path = request.getfixturevalue(f"tiny_{request.param}")
    overrides = {"vars.transformer": str(model_path), "training.dropout": 0.0,
                 "components.crf_ner.model.encoder.width": 32,
                 "components.crf_ner.model.encoder.dropout": 0.0}
    config = load_config(REPO_ROOT / "configs" / "nezha_bilstm_crf_df_at.cfg", overrides=overrides, interpolate=True)
    fix_random_seed(0)
    nlp = load_model_from_config(config, auto_fill=True)
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN_DATA]
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
