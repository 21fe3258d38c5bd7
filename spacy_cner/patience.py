"""A training patience that grows with the corpus ([training.patience]).

spaCy's loop stops when the dev score has not improved for `patience` steps. A fixed number of
steps is a different amount of training on different corpora: 1,600 steps are a dozen epochs of
a 4k-sentence corpus but about one of a 42k-sentence one, where a held-out newswire training
stopped after 5.6 epochs, its best dev score 1,600 steps before, while a plain BiLSTM-CRF was
still improving (issue 13). The loop takes patience as an int, resolved from the config, so a
registered function can compute it from the train corpus before training starts.
"""
import math
from pathlib import Path
from typing import Optional, Union

from spacy.util import registry

from .corpus_size import corpus_tokens


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
            f"spacy-cner.patience.v1 needs steps >= 0, epochs >= 0 and batch_words > 0, got {steps}, {epochs}, {batch_words}."
        )
    if corpus is None or not epochs:
        return steps
    return max(steps, math.ceil(epochs * corpus_tokens(corpus, "spacy-cner.patience.v1") / batch_words))
