"""crf_ner with the TENER encoder: configs/tener.cfg trains, overfits, saves and loads."""
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import load_config
from thinc.api import fix_random_seed

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAIN_DATA = [
    ("我在北京市工作", [(2, 5, "LOC")]),
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四是阿里巴巴的员工", [(0, 2, "PER"), (3, 7, "ORG")]),
    ("王五住在广州", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("腾讯总部在深圳", [(0, 2, "ORG"), (5, 7, "LOC")]),
]
TEXTS = ["我在北京市工作", "", "张三去了上海", "李四 在 阿里巴巴", "王五在深圳工作，腾讯总部在深圳。"]
# configs/tener.cfg's encoder, shrunk for tests; dropout off so that 60 steps overfit.
SMALL = {
    "components.crf_ner.model.tok2vec.width": 32,
    "components.crf_ner.model.tok2vec.embed_width": 16,
    "components.crf_ner.model.tok2vec.char_rows": 500,
    "components.crf_ner.model.tok2vec.bigram_rows": 1000,
    "components.crf_ner.model.encoder.n_heads": 2,
    "components.crf_ner.model.encoder.head_width": 8,
    "components.crf_ner.model.encoder.ffn_width": 32,
}
NO_DROPOUT = {
    "components.crf_ner.model.tok2vec.dropout": 0.0,
    "components.crf_ner.model.tok2vec.bigram_dropout": 0.0,
    "components.crf_ner.model.encoder.dropout": 0.0,
    "components.crf_ner.model.encoder.attention_dropout": 0.0,
    "components.crf_ner.model.encoder.output_dropout": 0.0,
}


def tener_model_config() -> dict:
    config = load_config(REPO_ROOT / "configs" / "tener.cfg", overrides={**SMALL, **NO_DROPOUT})
    return dict(config["components"]["crf_ner"]["model"])


@pytest.fixture(scope="module")
def trained():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": tener_model_config()})
    examples = [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in TRAIN_DATA]
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


def test_spacy_train_tener_config(tmp_path):
    from spacy.cli.train import train as spacy_train

    nlp = spacy.blank("zh")
    for name, data in (("train", TRAIN_DATA * 2), ("dev", TRAIN_DATA[:3])):
        docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in data]
        DocBin(docs=docs).to_disk(tmp_path / f"{name}.spacy")
    overrides = {
        **SMALL,
        "paths.train": str(tmp_path / "train.spacy"),
        "paths.dev": str(tmp_path / "dev.spacy"),
        "training.max_epochs": 2,
        "training.eval_frequency": 5,
        "training.batcher.size.start": 20,
        "training.batcher.size.stop": 20,
    }
    spacy_train(REPO_ROOT / "configs" / "tener.cfg", tmp_path / "output", overrides=overrides)
    nlp = spacy.load(tmp_path / "output" / "model-best")
    assert nlp.get_pipe("crf_ner").model.get_ref("encoder").name == "tener"
    assert "ents_f" in srsly.read_json(tmp_path / "output" / "model-best" / "meta.json")["performance"]
    nlp("我在北京市工作")
