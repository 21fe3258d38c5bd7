"""Slow: the CPU configs learn real Resume NER data (pytest -m slow)."""

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_cner.cli import app

from conftest import SHARED_DATA, train_from_config

RESUME = SHARED_DATA / "resume"


# config: (training steps, minimum test F1). 600 steps (about 4 epochs) of the default
# config reach about 0.91 test F1; TENER learns slower (about 0.88 dev F1 after 1000).
# The lexicon config (jieba's dictionary) is at about 0.89 dev F1 after 600 steps.
# A broken model stays far below any of them.
CONFIGS = {"default": (600, 0.85), "tener": (1000, 0.85), "lexicon": (600, 0.85)}


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_config_learns_resume(tmp_path, config):
    if not (RESUME / "train.char.bmes").exists():
        pytest.skip(f"Resume NER not found at {RESUME} (the shared data folder is absent)")
    from typer.testing import CliRunner

    for split in ("train", "dev", "test"):
        args = ["convert", str(RESUME / f"{split}.char.bmes"), str(tmp_path / f"{split}.spacy"), "--repair"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    overrides = {
        "paths.train": str(tmp_path / "train.spacy"),
        "paths.dev": str(tmp_path / "dev.spacy"),
        "training.max_steps": CONFIGS[config][0],
        "training.eval_frequency": 200,
    }
    nlp = spacy.load(train_from_config(config, tmp_path / "model", overrides) / "model-best")
    docs = DocBin().from_disk(tmp_path / "test.spacy").get_docs(nlp.vocab)
    scores = nlp.evaluate([Example(nlp.make_doc(doc.text), doc) for doc in docs])
    assert scores["ents_f"] > CONFIGS[config][1]
    assert set(scores["ents_per_type"]) == {"CONT", "EDU", "LOC", "NAME", "ORG", "PRO", "RACE", "TITLE"}
    if config == "default":
        # The README's and docs/'s snippets show the demo's model (600 steps of this config) on these sentences: each
        # must find entities there (李四在上海工作, no resume line, found none).
        import re

        from conftest import REPO_ROOT

        pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
        text = "\n".join(page.read_text(encoding="utf8") for page in pages)
        samples = set(re.findall(r"(?:nlp|spacy\.load\([^)]*\))\((?:\"|')([^\"']+)(?:\"|')\)", text))
        samples.discard("百度是一家高科技公司")  # the LAC pipeline's sample, not the demo's
        assert "李四，女，汉族，本科学历，现任上海银行行长。" in samples
        for sample in samples:
            assert nlp(sample).ents, f"the README's sample sentence {sample!r} gives no entity with the demo's model"
