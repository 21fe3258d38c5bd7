"""Training settings computed from the size of the train corpus: batch size, epochs, patience.

The defaults were chosen on corpora of 1,350-8,000 sentences (120-250k characters). On a
newswire corpus of 42k sentences (2M characters) the same batches take 2,000 steps an epoch, and
30 epochs would take hours. spaCy's loop reads these settings as numbers and schedules resolved
from the config, so registered functions compute them from the corpus before training starts;
each prints what it computed. The patience (spacy-cner.patience.v1) grew with the corpus first:
1,600 steps are a dozen epochs of a 4k-sentence corpus but about one of a 42k-sentence one, where a
held-out newswire training stopped after 5.6 epochs while a plain BiLSTM-CRF was still improving.
On a corpus of up to `steps_per_epoch * stop` tokens (1M with the default config) the batch size
is the config's, and on one of up to `tokens / epochs` (500k) the epochs are. Over `large_corpus`
tokens (1.5M) the default's FGM attacks at every second update (spacy-cner.fgm.v1, counted by crf_ner's
initialize) and spacy-cner.max_epochs.v2 gives the time that saves to more tokens of training.
"""

import math
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Set, Tuple, Union

from spacy.tokens import DocBin
from spacy.training.corpus import walk_corpus
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import compounding
from wasabi import msg

_printed: Set[Tuple] = set()


def corpus_tokens(corpus: Union[str, Path], setting: str) -> int:
    """The tokens of a .spacy file or a folder of them (read once per process).

    setting (str): The registered name asking, for the error message.
    """
    files = walk_corpus(corpus, ".spacy")
    if not files:
        raise ValueError(f"{setting} found no .spacy file at {corpus} (corpus = ${{paths.train}}).")
    return sum(_file_tokens(str(Path(path).resolve()), Path(path).stat().st_mtime_ns) for path in files)


@lru_cache(maxsize=64)
def _file_tokens(path: str, mtime_ns: int) -> int:
    return sum(len(doc) for doc in DocBin().from_disk(path).get_docs(Vocab()))


def words_per_batch(tokens: int, stop: int, max_stop: int, steps_per_epoch: int) -> int:
    """Words per batch: `stop`, or more where an epoch would take over steps_per_epoch steps
    (so the corpus fills steps_per_epoch batches), at most max_stop."""
    if stop <= 0 or max_stop < stop or steps_per_epoch <= 0:
        raise ValueError(
            f"Batch size rule needs 0 < stop <= max_stop and steps_per_epoch > 0, got stop={stop}, "
            f"max_stop={max_stop}, steps_per_epoch={steps_per_epoch}."
        )
    return min(max_stop, max(stop, math.ceil(tokens / steps_per_epoch)))


def _say(key: Tuple, text: str) -> None:
    """Print once per process (spaCy resolves [training] more than once)."""
    if key not in _printed:
        _printed.add(key)
        msg.info(text)


@registry.schedules("spacy-cner.corpus_batch_size.v1")
def corpus_batch_size(
    start: int,
    stop: int,
    compound: float,
    corpus: Optional[Union[str, Path]],
    max_stop: int,
    steps_per_epoch: int,
    t: float = 0.0,
) -> Iterator[float]:
    """compounding.v1 from start to stop words per batch, both scaled up on a large corpus.

        [training.batcher.size]
        @schedules = "spacy-cner.corpus_batch_size.v1"
        start = 500
        stop = 1000
        compound = 1.001
        corpus = ${paths.train}
        max_stop = 2000
        steps_per_epoch = 1000

    On a corpus of more than steps_per_epoch * stop tokens the batches grow to fill
    steps_per_epoch steps an epoch, up to max_stop words: larger batches cost less per
    token (BENCHMARKS.md#msra), where a large corpus has the
    examples to fill them.

    corpus (Optional[Union[str, Path]]): The train corpus; None: the config's start and stop.
    t (float): compounding.v1's t, the schedule's first step.
    RETURNS (Iterator[float]): The batch sizes, as compounding.v1.
    """
    if corpus is None:
        return compounding(start, stop, compound, t=t)
    tokens = corpus_tokens(corpus, "spacy-cner.corpus_batch_size.v1")
    words = words_per_batch(tokens, stop, max_stop, steps_per_epoch)
    if words != stop:
        _say(
            ("batch", tokens, words),
            f"Train corpus of {tokens:,} tokens: batches of up to {words:,} words "
            f"(not {stop:,}), so that an epoch takes about {steps_per_epoch:,} steps",
        )
    return compounding(max(1, round(start * words / stop)), words, compound, t=t)


@registry.misc("spacy-cner.max_epochs.v1")
def corpus_max_epochs(epochs: int, tokens: int, corpus: Optional[Union[str, Path]]) -> int:
    """At most `epochs` passes over the corpus, and at most `tokens` tokens of training in all.

        [training.max_epochs]
        @misc = "spacy-cner.max_epochs.v1"
        epochs = 30
        tokens = 15000000
        corpus = ${paths.train}

    The token budget bounds the training time of a large corpus (15M tokens: 7 epochs of
    MSRA's 2M; its training time: BENCHMARKS.md#msra); a corpus of
    up to tokens / epochs tokens keeps `epochs`. At least one epoch.

    corpus (Optional[Union[str, Path]]): The train corpus; None: `epochs`.
    RETURNS (int): max_epochs for spaCy's training loop.
    """
    if epochs < 0 or tokens <= 0:
        raise ValueError(f"spacy-cner.max_epochs.v1 needs epochs >= 0 and tokens > 0, got {epochs}, {tokens}.")
    if corpus is None:
        return epochs
    n_tokens = corpus_tokens(corpus, "spacy-cner.max_epochs.v1")
    budget = max(1, tokens // max(n_tokens, 1))
    if epochs and budget >= epochs:
        return epochs
    _say(
        ("epochs", n_tokens, budget),
        f"Train corpus of {n_tokens:,} tokens: at most {budget} epochs ({tokens:,} tokens of training)",
    )
    return budget


@registry.misc("spacy-cner.max_epochs.v2")
def corpus_max_epochs_v2(
    epochs: int, tokens: int, corpus: Optional[Union[str, Path]], large_corpus: int, large_tokens: int
) -> int:
    """spacy-cner.max_epochs.v1 with a second token budget for a large corpus.

        [training.max_epochs]
        @misc = "spacy-cner.max_epochs.v2"
        epochs = 30
        tokens = 15000000
        corpus = ${paths.train}
        large_corpus = 1500000
        large_tokens = 20000000

    A corpus of more than large_corpus tokens (0: none) trains on at most large_tokens tokens.
    configs/default.cfg gives its FGM's rule (spacy-cner.fgm.v1) the same large_corpus, written
    in both sections (an interpolation would break when a user replaces either one); FGM attacks
    a large corpus at every second update: a step then costs less than one with an attack at each,
    and 20M tokens take about the time 15M took (BENCHMARKS.md#msra).

    large_corpus (int): Tokens above which a corpus is large; 0: `tokens` for every corpus.
    large_tokens (int): The budget of a large corpus.
    RETURNS (int): max_epochs for spaCy's training loop.
    """
    if large_corpus < 0 or large_tokens <= 0:
        raise ValueError(
            f"spacy-cner.max_epochs.v2 needs large_corpus >= 0 and large_tokens > 0, "
            f"got {large_corpus}, {large_tokens}."
        )
    if corpus is not None and large_corpus and corpus_tokens(corpus, "spacy-cner.max_epochs.v2") > large_corpus:
        tokens = large_tokens
    return corpus_max_epochs(epochs, tokens, corpus)


@registry.misc("spacy-cner.patience.v1")
def corpus_patience(steps: int, epochs: float, corpus: Optional[Union[str, Path]], batch_words: int) -> int:
    """Patience in steps: at least `steps`, and at least `epochs` passes over the train corpus.

        [training.patience]
        @misc = "spacy-cner.patience.v1"
        steps = 1600
        epochs = 2
        corpus = ${paths.train}
        batch_words = ${training.batcher.size.stop}

    A pass is the corpus's tokens over batch_words (the words per batch of
    spacy.batch_by_words.v1, whose compounding size reaches its stop value after the first
    few hundred steps). On a corpus of at most steps * batch_words / epochs tokens (800k with
    the values above: about 17k sentences of news) the patience is `steps`.

    steps (int): The least patience, in steps.
    epochs (float): The least patience, in passes over the corpus.
    corpus (Optional[Union[str, Path]]): The train corpus, a .spacy file or a folder of them;
        None: `steps`.
    batch_words (int): Words (tokens) per batch.
    RETURNS (int): The patience in steps, for spaCy's training loop.
    """
    if steps < 0 or epochs < 0 or batch_words <= 0:
        raise ValueError(
            f"spacy-cner.patience.v1 needs steps >= 0, epochs >= 0 and batch_words > 0, "
            f"got {steps}, {epochs}, {batch_words}."
        )
    if corpus is None or not epochs:
        return steps
    return max(steps, math.ceil(epochs * corpus_tokens(corpus, "spacy-cner.patience.v1") / batch_words))


@registry.misc("spacy-cner.patience.v2")
def corpus_patience_v2(
    steps: int,
    epochs: float,
    corpus: Optional[Union[str, Path]],
    batch_words: int,
    max_batch_words: int,
    steps_per_epoch: int,
) -> int:
    """spacy-cner.patience.v1 with the batch size of spacy-cner.corpus_batch_size.v1: configs/default.cfg
    gives max_batch_words and steps_per_epoch as ${training.batcher.size.max_stop} and
    ${training.batcher.size.steps_per_epoch}, the rest as v1's example.

    RETURNS (int): The patience in steps: at least `steps`, and at least `epochs` epochs.
    """
    if steps < 0 or epochs < 0:
        raise ValueError(f"spacy-cner.patience.v2 needs steps >= 0 and epochs >= 0, got {steps}, {epochs}.")
    if corpus is None or not epochs:
        return corpus_patience(steps, epochs, None, batch_words)
    words = words_per_batch(
        corpus_tokens(corpus, "spacy-cner.patience.v2"), batch_words, max_batch_words, steps_per_epoch
    )
    return corpus_patience(steps, epochs, corpus, words)
