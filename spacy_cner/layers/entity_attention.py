"""Entity-label attention enhancement, "cl" (Wang, Wang and Shen, CCL 2024, eqs. 15-16).

During training, the attention scores between characters of the same gold entity
are scaled: A = (beta * W_cl + J) * scores, where W_cl[i, j] is 1 when tokens i and
j belong to the same gold entity and J is all ones. Prediction never sees gold
entities, so the model is used as is.

The gold entities travel as data: crf_ner's update gives its tagger (docs, entity ids)
instead of docs, one id per token (`example_entity_ids`), and the tagger hands the ids
on to the layer that has an `entity_attention_scale` (`takes_gold`): TENER's encoder as
(arrays, ids), a transformer tok2vec as (docs, ids). Those layers build the scale from
them in training only. A tok2vec shared through a listener is updated by its own
component and never sees gold entities.
"""

from typing import Any, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.training import Example
from thinc.api import Model
from thinc.types import Ints1d
from torch.overrides import TorchFunctionMode

NO_ENTITY = -1


def example_entity_ids(example: Example) -> Ints1d:
    """Per predicted token, the index of the gold entity it is in (NO_ENTITY outside or unknown)."""
    ids = numpy.full((len(example.predicted),), NO_ENTITY, dtype="i")
    entities, _ = example.get_aligned_ents_and_ner()  # the gold entities on the predicted tokens
    for index, entity in enumerate(entities):
        ids[entity.start : entity.end] = index
    return ids


def takes_gold(model: Model) -> bool:
    """Whether the layer reads gold entity ids beside its input (an entity_attention_scale > 0)."""
    return bool(model.attrs.get("entity_attention_scale"))


def gold_layers_out_of_reach(roots: Sequence[Optional[Model]], fed: Sequence[Optional[Model]]) -> List[Model]:
    """The layers under roots that have an entity_attention_scale but are not one of the fed
    layers, the only ones a CRF tagger hands the gold entities to: those would train without them.

    roots (Sequence[Optional[Model]]): The models to search (None entries skipped).
    fed (Sequence[Optional[Model]]): The layers that get the gold entities.
    RETURNS (List[Model]): The enhanced layers out of reach, in walk order.
    """
    fed = [layer for layer in fed if layer is not None]
    nodes = [node for root in roots if root is not None for node in root.walk()]
    return [node for node in nodes if takes_gold(node) and not any(node is layer for layer in fed)]


def with_gold(X: Any) -> Tuple[Any, Optional[List[Ints1d]]]:
    """A layer's input and its gold entity ids: X is (input, ids) or the input alone (ids None).

    Only a tuple is read as a pair: the inputs these layers take (docs, arrays, Ragged, padded
    batches) are lists or thinc dataclasses, never tuples.
    """
    if isinstance(X, tuple):
        inputs, entity_ids = X
        return inputs, list(entity_ids)
    return X, None


def check_gold(entity_ids: Sequence[Ints1d], lengths: Sequence[int], where: str) -> None:
    """One entity id per token of every doc, or a ValueError naming the first doc that differs."""
    if len(entity_ids) != len(lengths):
        raise ValueError(f"{where} got gold entity ids for {len(entity_ids)} docs and an input of {len(lengths)} docs.")
    for i, (ids, length) in enumerate(zip(entity_ids, lengths)):
        if len(ids) != length:
            raise ValueError(
                f"{where} got {len(ids)} gold entity ids for doc {i} of {length} tokens: "
                "entity_attention_scale needs one input row per token of the pipe's docs."
            )


def entity_scale(entity_ids: Ints1d, beta: float) -> numpy.ndarray:
    """beta * W_cl + J for one sequence: (n, n), 1 + beta within each gold entity, else 1."""
    same = (entity_ids[:, None] == entity_ids[None, :]) & (entity_ids[:, None] != NO_ENTITY)
    return (1.0 + beta * same).astype("float32")


def wordpiece_entity_scale(
    window_tokens: Sequence[Sequence[int]], entity_ids: Sequence[Ints1d], n_steps: int, content_offset: int, beta: float
) -> numpy.ndarray:
    """beta * W_cl + J over the wordpieces of transformer windows, (n_windows, n_steps, n_steps).

    window_tokens: per window, the token index of each of its content wordpieces (they
        start at content_offset, after the special tokens); special tokens and padding get 1.
    entity_ids: per window, the gold entity ids of its doc's tokens.
    """
    scale = numpy.ones((len(window_tokens), n_steps, n_steps), dtype="float32")
    for i, (tokens, ids) in enumerate(zip(window_tokens, entity_ids)):
        positions = numpy.full((n_steps,), NO_ENTITY, dtype="i")
        positions[content_offset : content_offset + len(tokens)] = ids[numpy.asarray(tokens, dtype="i")]
        scale[i] = entity_scale(positions, beta)
    return scale


class ScaleAttentionScores(TorchFunctionMode):
    """Multiply the input of every attention softmax, (batch, heads, length, length), by a scale.

    How the scale reaches a Hugging Face encoder, whose attention code cannot be given one.
    Eager attention computes softmax(scores + mask); with a scale of 1 wherever the
    mask blocks special tokens and padding, softmax((scores + mask) * scale) equals
    softmax(scores * scale + mask), the enhanced attention (a pair of one entity that an
    attention window blocks only gets blocked harder).
    """

    SOFTMAXES = (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax)

    def __init__(self, scale: torch.Tensor) -> None:
        super().__init__()
        self.scale = scale  # shape: (batch, 1, length, length)
        self.n_scaled = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.SOFTMAXES and args and self._is_scores(args[0]):
            self.n_scaled += 1
            args = (args[0] * self.scale.to(args[0].dtype),) + tuple(args[1:])
        return func(*args, **kwargs)

    def _is_scores(self, tensor) -> bool:
        return (
            isinstance(tensor, torch.Tensor)
            and tensor.dim() == 4
            and tensor.shape[0] == self.scale.shape[0]
            and tensor.shape[2:] == self.scale.shape[2:]
        )


def check_scale(beta: float, where: str) -> None:
    """entity_attention_scale must be a non-negative number."""
    if not beta >= 0:
        raise ValueError(f"{where} entity_attention_scale must be >= 0 (0 turns it off), got {beta}.")
