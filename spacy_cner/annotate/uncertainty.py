"""How unsure crf_ner is of a doc: the active-learning strategies that `select` ranks texts by, which the
pipe's `uncertainty` setting computes (doc._.uncertainty), and the pipeline's component that scores.
Pure functions of the pipe's marginals and span probabilities: the pipe imports them, never the reverse.

Strategies (STRATEGIES):
- random: a seeded hash of the text (a baseline; the same order wherever it is computed);
- entropy: the tag entropy summed over the tokens, sum_t H(P(tag_t)); mean-entropy: per token;
- least-confident: the least sure entity decision, max over the spans the model considers (its
  entities and the spans at least candidate_threshold probable) of 1 - max(p, 1 - p);
- expected-count: the variance of the number of entities over those spans, sum p (1 - p).
"""

import hashlib
from typing import Iterable

import numpy
from spacy.language import Language

STRATEGIES = ("random", "entropy", "mean-entropy", "least-confident", "expected-count")
# The strategies that score the spans the model considers (the pipe's span group).
SPAN_STRATEGIES = ("least-confident", "expected-count")


def strategy_score(
    strategy: str, marginals: numpy.ndarray, span_probabilities: Iterable[float], text: str = "", seed: int = 0
) -> float:
    """A text's score under a strategy (see the module's docstring).

    marginals (numpy.ndarray): P(token t has tag j), (n_tokens, n_tags).
    span_probabilities (Iterable[float]): The probabilities of the spans the model considers.
    text (str): The text (the random strategy hashes it).
    seed (int): The random strategy's seed.
    RETURNS (float): The score; higher is more worth labelling.
    """
    if strategy == "random":
        digest = hashlib.blake2b(f"{seed}\0{text}".encode("utf8", "surrogatepass"), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2.0**64
    if strategy in ("entropy", "mean-entropy"):
        p = numpy.asarray(marginals, dtype="float64")
        entropy = float(-(p * numpy.log(numpy.where(p > 0, p, 1.0))).sum())
        return entropy / len(p) if strategy == "mean-entropy" and len(p) else entropy
    probabilities = numpy.asarray(list(span_probabilities), dtype="float64")
    if strategy == "least-confident":
        return float(numpy.minimum(probabilities, 1 - probabilities).max()) if len(probabilities) else 0.0
    if strategy == "expected-count":
        return float((probabilities * (1 - probabilities)).sum())
    raise ValueError(f"Unknown strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}.")


def scoring_pipe(nlp: Language) -> str:
    """The name of the pipeline's crf_ner component (one that gives marginals)."""
    names = [name for name, proc in nlp.pipeline if hasattr(proc, "predict_marginals")]
    if len(names) != 1:
        raise ValueError(
            f"select needs a pipeline with one crf_ner component; this one has {len(names)} "
            f"(its components: {', '.join(nlp.pipe_names) or 'none'})."
        )
    return names[0]
