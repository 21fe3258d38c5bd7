"""Batch size, epochs and patience computed from the train corpus (spacy_cner.training.corpus_size)."""

import itertools
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import registry

import spacy_cner  # noqa: F401  (registers the functions)
from spacy_cner.training.corpus_size import corpus_tokens, words_per_batch


def write_corpus(path: Path, n_docs: int, text: str = "张三在北京工作") -> Path:
    DocBin(docs=[spacy.blank("zh").make_doc(text) for _ in range(n_docs)]).to_disk(path)
    return path


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpora")
    # 70 tokens and 14,000 tokens ("large" with 10 steps an epoch, 1M tokens a pass)
    return write_corpus(folder / "small.spacy", 10), write_corpus(folder / "large.spacy", 20, "张三在北京工作" * 100)


def test_batch_words_grow_only_past_steps_per_epoch_batches():
    assert words_per_batch(100_000, 1000, 2000, 1000) == 1000
    assert words_per_batch(1_000_000, 1000, 2000, 1000) == 1000
    assert words_per_batch(1_500_001, 1000, 2000, 1000) == 1501
    assert words_per_batch(9_000_000, 1000, 2000, 1000) == 2000
    with pytest.raises(ValueError, match="max_stop"):
        words_per_batch(10, 1000, 500, 1000)


def test_corpus_batch_size_schedule(corpora, capsys):
    small, large = corpora
    make = registry.schedules.get("spacy-cner.corpus_batch_size.v1")
    settings = {"start": 500, "stop": 1000, "compound": 1.001, "max_stop": 2000, "steps_per_epoch": 10}
    # A small corpus: exactly compounding.v1(500, 1000, 1.001)
    expected = list(itertools.islice(registry.schedules.get("compounding.v1")(500, 1000, 1.001), 2000))
    assert list(itertools.islice(make(corpus=str(small), **settings), 2000)) == expected
    assert list(itertools.islice(make(corpus=None, **settings), 2000)) == expected
    assert "batches of" not in capsys.readouterr().out
    # 14,000 tokens in 10 steps: 1,400 words per batch, from 700
    sizes = list(itertools.islice(make(corpus=str(large), **settings), 5000))
    assert sizes[0] == 700 and max(sizes) == 1400
    assert "batches of up to 1,400 words" in capsys.readouterr().out


def test_max_epochs_is_a_token_budget(corpora, capsys):
    small, large = corpora
    max_epochs = registry.misc.get("spacy-cner.max_epochs.v1")
    assert max_epochs(epochs=30, tokens=150_000, corpus=str(small)) == 30
    assert max_epochs(epochs=30, tokens=150_000, corpus=None) == 30
    assert "at most" not in capsys.readouterr().out
    assert max_epochs(epochs=30, tokens=150_000, corpus=str(large)) == 10  # 14,000 tokens a pass
    assert "at most 10 epochs" in capsys.readouterr().out
    assert max_epochs(epochs=30, tokens=10_000, corpus=str(large)) == 1  # at least one
    assert max_epochs(epochs=0, tokens=150_000, corpus=str(large)) == 10  # 0: no cap but the budget
    with pytest.raises(ValueError, match="tokens > 0"):
        max_epochs(epochs=30, tokens=0, corpus=str(large))


def test_max_epochs_v2_gives_a_large_corpus_its_own_budget(corpora, capsys):
    small, large = corpora
    max_epochs = registry.misc.get("spacy-cner.max_epochs.v2")
    settings = {"epochs": 30, "tokens": 140_000, "large_tokens": 280_000}
    # 14,000 tokens over large_corpus 1,000: 280,000 tokens, 20 epochs (140,000 would be 10)
    assert max_epochs(corpus=str(large), large_corpus=1_000, **settings) == 20
    assert "at most 20 epochs" in capsys.readouterr().out
    # Not over large_corpus (the 14,000 tokens are not more than 14,000), or the rule off: v1's 10
    assert max_epochs(corpus=str(large), large_corpus=14_000, **settings) == 10
    assert max_epochs(corpus=str(large), large_corpus=0, **settings) == 10
    # A small corpus and no corpus keep the epochs
    assert max_epochs(corpus=str(small), large_corpus=1, **settings) == 30
    assert max_epochs(corpus=None, large_corpus=1, **settings) == 30
    with pytest.raises(ValueError, match="large_corpus >= 0"):
        max_epochs(corpus=str(large), large_corpus=-1, **settings)


def test_default_config_shares_the_large_corpus_threshold_between_fgm_and_the_budget():
    """configs/default.cfg: FGM's large_corpus is the token budget's (one number to change), and the
    budget of a large corpus buys the time its cheaper steps save (FGM at every second update:
    0.75 of a step's cost, so 15M / 0.75 = 20M tokens)."""
    from spacy_cner.training.shipped_configs import config_path

    config = spacy.util.load_config(config_path("default"), interpolate=True)
    attack, budget = config["components"]["crf_ner"]["adversarial"], config["training"]["max_epochs"]
    assert attack["large_corpus"] == budget["large_corpus"] == 1_500_000
    assert attack["every"] == 1 and attack["large_every"] == 2
    step_cost = (1 + 1 / attack["large_every"]) / (1 + 1 / attack["every"])
    assert budget["large_tokens"] * step_cost == budget["tokens"]


def test_patience_v2_counts_epochs_in_the_grown_batches(corpora):
    small, large = corpora
    patience = registry.misc.get("spacy-cner.patience.v2")
    settings = {"steps": 16, "epochs": 2, "batch_words": 1000, "max_batch_words": 2000, "steps_per_epoch": 10}
    assert patience(corpus=str(small), **settings) == 16
    assert patience(corpus=str(large), **settings) == 20  # 2 epochs of 10 steps (1,400-word batches)
    assert patience(corpus=str(large), **{**settings, "max_batch_words": 1000}) == 28  # 1,000-word batches
    v1 = registry.misc.get("spacy-cner.patience.v1")
    assert v1(steps=16, epochs=2, corpus=str(large), batch_words=1000) == 28


def test_corpus_tokens_reads_a_folder_and_names_a_missing_corpus(tmp_path):
    write_corpus(tmp_path / "a.spacy", 3)
    write_corpus(tmp_path / "b.spacy", 2)
    assert corpus_tokens(tmp_path, "test") == 35
    write_corpus(tmp_path / "b.spacy", 4)  # rewritten: read again
    assert corpus_tokens(tmp_path, "test") == 49
    with pytest.raises(ValueError, match="no .spacy file"), pytest.warns(UserWarning, match="W090"):
        corpus_tokens(tmp_path / "missing", "spacy-cner.max_epochs.v1")
