"""Entity-label attention enhancement, "cl" (Wang, Wang and Shen, CCL 2024, eqs. 15-16).

During training, the attention scores between characters of the same gold entity
are scaled: A = (beta * W_cl + J) * scores, where W_cl[i, j] is 1 when tokens i and
j belong to the same gold entity and J is all ones. Prediction never sees gold
entities, so the model is used as is.

crf_ner's update makes the gold entities of the batch it trains on known with
`training_gold`; encoders that have an `entity_attention_scale` (beta) read them
with `gold_entity_ids` in their training forward pass. Other code paths (a forward
pass outside crf_ner's update, a shared tok2vec updated by another component)
see no gold entities and attend as usual.
"""
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence

import numpy
from spacy.tokens import Doc
from spacy.training import Example

NO_ENTITY = -1


@dataclass
class _GoldEntities:
    docs: List[Doc]
    entity_ids: List[numpy.ndarray]


_GOLD: ContextVar[Optional[_GoldEntities]] = ContextVar("spacy_cner_gold_entities", default=None)


def example_entity_ids(example: Example) -> numpy.ndarray:
    """Per predicted token, the index of the gold entity it is in (NO_ENTITY outside or unknown)."""
    ids = numpy.full((len(example.predicted),), NO_ENTITY, dtype="i")
    entities, _ = example.get_aligned_ents_and_ner()  # the gold entities on the predicted tokens
    for index, entity in enumerate(entities):
        ids[entity.start:entity.end] = index
    return ids


@contextmanager
def training_gold(docs: Sequence[Doc], entity_ids: Sequence[numpy.ndarray]) -> Iterator[None]:
    """Make the gold entities of the docs being trained on visible to the encoders."""
    token = _GOLD.set(_GoldEntities(list(docs), list(entity_ids)))
    try:
        yield
    finally:
        _GOLD.reset(token)


def gold_entity_ids(
    docs: Optional[Sequence[Doc]] = None, lengths: Optional[Sequence[int]] = None
) -> Optional[List[numpy.ndarray]]:
    """The per-token gold entity ids of the batch in training, or None outside crf_ner's update.

    docs: the batch, when the caller has it; other docs than the ones trained on get None.
    lengths: the batch's token counts, when the caller only has arrays in doc order.
    """
    gold = _GOLD.get()
    if gold is None:
        return None
    if docs is not None:
        if len(docs) != len(gold.docs) or any(a is not b for a, b in zip(docs, gold.docs)):
            return None
        return gold.entity_ids
    if lengths is not None and list(lengths) != [len(ids) for ids in gold.entity_ids]:
        raise ValueError(
            f"The encoder got {len(lengths)} sequences of lengths {list(lengths)[:8]} while crf_ner "
            f"trains on {len(gold.docs)} docs of {[len(doc) for doc in gold.docs][:8]} tokens: "
            "entity_attention_scale needs one input row per token of the pipe's docs."
        )
    return gold.entity_ids


def entity_scale(entity_ids: numpy.ndarray, beta: float) -> numpy.ndarray:
    """beta * W_cl + J for one sequence: (n, n), 1 + beta within each gold entity, else 1."""
    same = (entity_ids[:, None] == entity_ids[None, :]) & (entity_ids[:, None] != NO_ENTITY)
    return (1.0 + beta * same).astype("float32")


def check_scale(beta: float, where: str) -> None:
    """entity_attention_scale must be a non-negative number."""
    if not beta >= 0:
        raise ValueError(f"{where} entity_attention_scale must be >= 0 (0 turns it off), got {beta}.")
