"""spacy-cner.patience.v1: a training patience that grows with the corpus."""

import itertools
from pathlib import Path

import pytest
import spacy
from spacy.schemas import ConfigSchemaTraining
from spacy.tokens import DocBin
from spacy.util import load_config, registry

import spacy_cner  # noqa: F401  (registers the function)
from conftest import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"


def write_corpus(path: Path, n_docs: int, text: str = "张三在北京工作") -> Path:
    nlp = spacy.blank("zh")
    DocBin(docs=[nlp.make_doc(text) for _ in range(n_docs)]).to_disk(path)
    return path


def test_patience_is_steps_or_epochs_of_the_corpus(tmp_path):
    patience = registry.misc.get("spacy-cner.patience.v1")
    corpus = write_corpus(tmp_path / "train.spacy", 300)  # 2,100 tokens
    assert patience(steps=100, epochs=2, corpus=str(corpus), batch_words=1000) == 100  # 2 passes: 5 steps
    assert patience(steps=100, epochs=2, corpus=str(corpus), batch_words=10) == 420  # 2 passes: 420 steps
    assert patience(steps=100, epochs=1.5, corpus=str(corpus), batch_words=20) == 158  # rounded up
    (tmp_path / "folder").mkdir()
    write_corpus(tmp_path / "folder" / "a.spacy", 300)
    write_corpus(tmp_path / "folder" / "b.spacy", 300)
    assert patience(steps=100, epochs=2, corpus=str(tmp_path / "folder"), batch_words=10) == 840
    assert patience(steps=100, epochs=2, corpus=None, batch_words=10) == 100
    assert patience(steps=100, epochs=0, corpus=str(corpus), batch_words=10) == 100
    with pytest.raises(ValueError, match="batch_words"):
        patience(steps=100, epochs=2, corpus=str(corpus), batch_words=0)
    with pytest.raises(ValueError, match="no .spacy file"), pytest.warns(UserWarning, match="W090"):
        patience(steps=100, epochs=2, corpus=str(tmp_path / "missing"), batch_words=10)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpora")
    # 1.4M tokens in the large one: 2 passes of 1,000-word batches are 2,800 steps; 1.61M in the
    # huge one, over default.cfg's large_corpus (1.5M tokens)
    return (
        write_corpus(folder / "small.spacy", 10),
        write_corpus(folder / "large.spacy", 2_000, "张三在北京工作" * 100),
        write_corpus(folder / "huge.spacy", 2_300, "张三在北京工作" * 100),
    )


@pytest.mark.parametrize("name", ["default", "char_bigram", "lexicon", "tener"])
def test_configs_resolve_a_patience_for_spacys_loop(corpora, name):
    """spaCy's loop takes [training] patience as an int: the block resolves to one from the
    train corpus and the batcher's words per batch (1,000)."""
    small, large, huge = corpora
    # default.cfg grows its batches to 1,400 words on the large corpus (spacy-cner.corpus_batch_size.v1)
    # and caps its epochs at 15M tokens (spacy-cner.max_epochs.v2): 3 epochs are 3,000 steps. The huge
    # corpus is over its large_corpus: 1,610-word batches and 20M tokens, 12 epochs.
    large_patience, large_epochs = (3000, 10) if name == "default" else (2800, 30)
    huge_patience, huge_epochs = (3000, 12) if name == "default" else (3220, 30)
    cases = ((small, 1600, 30), (large, large_patience, large_epochs), (huge, huge_patience, huge_epochs))
    for corpus, expected, epochs in cases:
        config = load_config(
            CONFIGS / f"{name}.cfg", overrides={"paths.train": str(corpus), "paths.dev": str(small)}, interpolate=True
        )
        training = registry.resolve(config["training"], schema=ConfigSchemaTraining)
        assert training["patience"] == expected
        assert training["max_epochs"] == epochs
        sizes = list(itertools.islice(training["batcher"].keywords["size"], 3000))
        grown = {large: 1400, huge: 1610}.get(corpus, 1000) if name == "default" else 1000
        assert max(sizes) == grown
