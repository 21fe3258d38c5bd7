"""`spacy train` on the configs in configs/ with the toy corpus: what each saves, loaded back."""

import json
import subprocess
import sys

import numpy
import pytest
import spacy
import srsly
from spacy.training import Example
from spacy.util import load_config

from conftest import LEXICON_WORDS, REPO_ROOT, SMALL_TENER, TRAIN_DATA
from conftest import make_examples, train_from_config, write_corpus, write_lexicon

TEXTS = ["我在北京市工作", "", "张三去了上海。李四 ab", "腾讯总部在深圳"]
TWO_EPOCHS = {
    "training.max_epochs": 2,
    "training.eval_frequency": 5,
    # About three sentences per batch: several steps per epoch.
    "training.batcher.size.start": 20,
    "training.batcher.size.stop": 20,
}
SIX_STEPS = {"training.max_steps": 6, "training.eval_frequency": 3}
TRANSFORMER_STEPS = {"training.optimizer.learn_rate.warmup_steps": 2, "training.batcher.size": 40}


def test_spacy_train_default_config(tmp_path, fake_lac_sdist):
    """configs/default.cfg as shipped but smaller, LAC's vectors from a fabricated sdist (tests/fake_lac.py)."""
    overrides = {
        **write_corpus(tmp_path),
        "paths.lac_sdist": str(fake_lac_sdist),
        "components.crf_ner.model.tok2vec.width": 32,
        "components.crf_ner.model.tok2vec.embed_width": 16,
        "components.crf_ner.model.tok2vec.char_rows": 500,
        "components.crf_ner.model.tok2vec.bigram_rows": 1000,
        "components.crf_ner.model.encoder.width": 32,
        **TWO_EPOCHS,
    }
    output = train_from_config("default", tmp_path / "output", overrides)
    for name in ("model-best", "model-last"):
        nlp = spacy.load(output / name)
        assert nlp.pipe_names == ["crf_ner"]
        assert nlp.get_pipe("crf_ner").labels == ("LOC", "ORG", "PER")
        assert "ents_f" in srsly.read_json(output / name / "meta.json")["performance"]
        # The config's before_to_disk fitted the temperature on dev before saving: fitting the
        # saved weights again on dev gives it back.
        ner = nlp.get_pipe("crf_ner")
        assert (ner.adversarial.method, ner.adversarial.epsilon) == ("fgm", 3.0)  # the default trains with FGM
        saved = ner.cfg["temperature"]
        dev = [Example(nlp.make_doc(eg.text), eg.reference) for eg in make_examples(nlp, TRAIN_DATA[:3])]
        assert ner.fit_temperature(dev)["temperature"] == pytest.approx(saved, abs=1e-9)
        assert any("LAC" in source["name"] for source in nlp.meta["sources"])
        nlp("我在北京市工作")


def test_spacy_train_tener_config(tmp_path):
    output = train_from_config("tener", tmp_path / "output", {**SMALL_TENER, **write_corpus(tmp_path), **TWO_EPOCHS})
    nlp = spacy.load(output / "model-best")
    assert nlp.get_pipe("crf_ner").model.get_ref("encoder").name == "tener"
    assert "ents_f" in srsly.read_json(output / "model-best" / "meta.json")["performance"]
    nlp("我在北京市工作")


def test_spacy_train_reports_and_weights_robust_f(tmp_path, fake_lac_sdist):
    config = load_config(REPO_ROOT / "configs" / "default.cfg")
    config["components"]["crf_ner"]["scorer"] = {"@scorers": "spacy-cner.robust_ner_scorer.v1"}
    config["training"]["score_weights"] = {"ents_f": 0.0, "ents_robust_f": 1.0, "ents_asr": None}
    config.to_disk(tmp_path / "config.cfg")
    overrides = {
        **write_corpus(tmp_path, TRAIN_DATA[:3], TRAIN_DATA[:3]),
        "paths.lac_sdist": str(fake_lac_sdist),
        "training.max_steps": 20,
        "training.eval_frequency": 10,
    }
    output = train_from_config(tmp_path / "config.cfg", tmp_path / "output", overrides)
    performance = srsly.read_json(output / "model-best" / "meta.json")["performance"]
    assert 0.0 <= performance["ents_robust_f"] <= 1.0
    assert "ents_asr" in performance
    assert spacy.load(output / "model-best").config["training"]["score_weights"]["ents_robust_f"] == 1.0


# config: (tiny model, has BiLSTM, has scalar mix, adversarial)
TRANSFORMER_CONFIGS = {
    "bert_crf": ("bert", False, False, False),
    "bert_bilstm_crf": ("bert", True, False, False),
    "nezha_bilstm_crf": ("nezha", True, False, False),
    "nezha_bilstm_crf_df": ("nezha", True, True, False),
    "nezha_bilstm_crf_df_at": ("nezha", True, True, True),
    # with the lexicon adapter after layer 1, jieba's dictionary (the lexicon test below has more)
    "lebert": ("bert", False, False, False),
}


def test_every_transformer_config_is_listed():
    found = {p.stem for p in (REPO_ROOT / "configs").glob("*.cfg")}
    assert set(TRANSFORMER_CONFIGS) <= found
    for name in found - set(TRANSFORMER_CONFIGS):
        assert "TransformerTok2Vec" not in (REPO_ROOT / "configs" / f"{name}.cfg").read_text(encoding="utf8")


@pytest.mark.parametrize("name", sorted(TRANSFORMER_CONFIGS))
def test_spacy_train_transformer_config(name, tmp_path, request):
    kind, has_bilstm, has_mix, adversarial = TRANSFORMER_CONFIGS[name]
    overrides = {
        "vars.transformer": str(request.getfixturevalue(f"tiny_{kind}")),
        **write_corpus(tmp_path, TRAIN_DATA[:4] * 2, TRAIN_DATA[:2]),
        **SIX_STEPS,
        **TRANSFORMER_STEPS,
    }
    nlp = spacy.load(train_from_config(name, tmp_path / "output", overrides) / "model-best")
    ner = nlp.get_pipe("crf_ner")
    assert ner.model.has_ref("encoder") == has_bilstm
    assert (ner.scalar_mix_weights() is not None) == has_mix
    assert (ner.adversarial is not None) == adversarial
    assert ner.cfg["tok2vec_learn_rate_scale"] == 0.5
    assert [len(doc) for doc in nlp.pipe(TEXTS)] == [len(nlp.make_doc(t)) for t in TEXTS]


# config: (tiny transformer, lexicon with vectors)
LEXICON_CONFIGS = {"lexicon": (None, False), "lebert": ("bert", True)}


@pytest.mark.parametrize("name", sorted(LEXICON_CONFIGS))
def test_spacy_train_and_the_saved_pipeline_carries_its_lexicon(name, tmp_path, request):
    kind, vectors = LEXICON_CONFIGS[name]
    lexicon_path = write_lexicon(tmp_path / "lexicon.txt", vectors)
    overrides = {
        **write_corpus(tmp_path, TRAIN_DATA[:4] * 2, TRAIN_DATA[:2]),
        "paths.lexicon": str(lexicon_path),
        **SIX_STEPS,
        "components.crf_ner.model.tok2vec.lexicon_adapter.word_rows": 64,
    }
    if kind:
        overrides.update({"vars.transformer": str(request.getfixturevalue(f"tiny_{kind}")), **TRANSFORMER_STEPS})
    else:
        overrides.update({"components.crf_ner.model.tok2vec.width": 16, "components.crf_ner.model.encoder.width": 16})
    model_path = train_from_config(name, tmp_path / "output", overrides) / "model-best"
    nlp = spacy.load(model_path)
    adapter = nlp.get_pipe("crf_ner").model.get_ref("tok2vec").get_ref("lexicon_adapter")
    lexicon = adapter.attrs["lexicon"].lexicon
    assert lexicon.words == LEXICON_WORDS  # min_word_length 2 left out 的
    assert (lexicon.vectors is not None) == vectors
    if kind:
        assert nlp.get_pipe("crf_ner").model.get_ref("tok2vec").attrs["lexicon_layer"] == 1
    # The pipe saves the lexicon under its own key, not in the model's weights.
    assert (model_path / "crf_ner" / "lexicon").exists()
    assert "阿里巴巴".encode("utf8") not in (model_path / "crf_ner" / "model").read_bytes()
    expected = [[[e.start_char, e.end_char, e.label_] for e in doc.ents] for doc in nlp.pipe(TEXTS)]
    scores = [float(v) for v in nlp.get_pipe("crf_ner").model.predict([nlp.make_doc(TEXTS[0])])[0].ravel()]
    # A fresh interpreter, without the lexicon file (nor jieba's), loads and predicts the same.
    lexicon_path.unlink()
    code = (
        "import json, sys, spacy\n"
        "sys.modules['jieba'] = None\n"
        f"nlp = spacy.load({str(model_path)!r})\n"
        f"texts = {TEXTS!r}\n"
        "ents = [[[e.start_char, e.end_char, e.label_] for e in doc.ents] for doc in nlp.pipe(texts)]\n"
        "scores = nlp.get_pipe('crf_ner').model.predict([nlp.make_doc(texts[0])])[0].ravel().tolist()\n"
        "print(json.dumps([ents, scores]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ents, loaded_scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert ents == expected
    numpy.testing.assert_allclose(loaded_scores, scores, atol=1e-4)
