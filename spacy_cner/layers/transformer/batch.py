"""Padded batches of transformer windows: wordpiece ids with special tokens, the attention
mask (3-D with an attention window, cs), and the lexicon adapter's word ids."""

from typing import Any, Dict, List, Optional, Tuple

import numpy

from ..attention_window import allowed_keys
from ...long_docs import Window
from .wordpieces import DocPlan


def window_geometry(config, tokenizer, window_size: int) -> Tuple[int, int]:
    """Most content wordpieces per window, and where the content starts after the special tokens.

    config: the HF model's config; window_size: the setting (0 is the model's maximum).
    """
    limit = window_size
    if not limit:
        limit = min(tokenizer.model_max_length, getattr(config, "max_position_embeddings", 512))
    n_special = tokenizer.num_special_tokens_to_add(pair=False)
    if limit - n_special < 2:
        raise ValueError(
            f"Transformer window_size {limit} leaves {limit - n_special} wordpieces after the "
            f"{n_special} special tokens; use a window_size of at least {n_special + 2}."
        )
    probe = tokenizer.build_inputs_with_special_tokens([-1])
    return limit - n_special, probe.index(-1)


def window_batch(
    tokenizer,
    items: List[Tuple[DocPlan, Window]],
    content_offset: int,
    attention_window: Optional[int] = None,
    max_words_per_char: Optional[int] = None,
) -> Dict[str, Any]:
    """Padded input_ids (n_windows, length) and attention_mask, with special tokens.

    The mask is (n_windows, length), or (n_windows, length, length) with an attention window.
    With a lexicon adapter (max_words_per_char, its cap), "word_ids" holds each wordpiece's
    lexicon words, (n_windows, length, max_words_per_char), -1 for none.
    """
    contents = [plan.input_ids[w.start : w.end] for plan, w in items]
    lengths = numpy.asarray([len(content) for content in contents], dtype="int64")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    around = special_tokens(tokenizer)
    if around is None:  # special tokens that depend on the content: the tokenizer adds them window by window
        sequences = [tokenizer.build_inputs_with_special_tokens(list(content)) for content in contents]
        input_ids, attention_mask = _padded(sequences, pad_id)
    else:
        prefix, suffix = around
        totals = lengths + len(prefix) + len(suffix)
        n_steps = int(totals.max())
        input_ids = numpy.full((len(items), n_steps), pad_id, dtype="int64")
        input_ids[:, : len(prefix)] = prefix
        rows = numpy.repeat(numpy.arange(len(items)), lengths)
        window_starts = numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
        columns = len(prefix) + numpy.arange(int(lengths.sum())) - window_starts
        input_ids[rows, columns] = numpy.concatenate(contents) if len(rows) else []
        for k, token_id in enumerate(suffix):
            input_ids[numpy.arange(len(items)), len(prefix) + lengths + k] = token_id
        attention_mask = (numpy.arange(n_steps)[None, :] < totals[:, None]).astype("int64")
    n_steps = input_ids.shape[1]
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if max_words_per_char is not None:
        # shape: (n_windows, length, max_words_per_char); special tokens and padding get none
        ids = numpy.full((len(items), n_steps, max_words_per_char), -1, dtype="int64")
        for i, (plan, w) in enumerate(items):
            ids[i, content_offset : content_offset + w.end - w.start] = plan.wordpiece_words[w.start : w.end]
        batch["word_ids"] = ids
    if attention_window is None:
        return batch
    # Token positions of every wordpiece; special tokens sit just outside the content.
    positions = numpy.zeros((len(items), n_steps), dtype="f")
    real_lengths = attention_mask.sum(axis=1)
    for i, (plan, w) in enumerate(items):
        content = plan.wordpiece_tokens[w.start : w.end]
        end = content_offset + len(content)
        positions[i, :content_offset] = content[0] - 1
        positions[i, content_offset:end] = content
        positions[i, end : real_lengths[i]] = content[-1] + 1
    real = attention_mask == 1
    # shape: (n_windows, query, key)
    batch["attention_mask"] = (allowed_keys(positions, real, attention_window) & real[:, None, :]).astype("int64")
    return batch


def special_tokens(tokenizer) -> Optional[Tuple[List[int], List[int]]]:
    """The ids the tokenizer puts before and after a window's wordpieces ([CLS] and [SEP] for BERT), or None
    where they are not the same around any content (then build_inputs_with_special_tokens makes each window)."""
    probe = tokenizer.build_inputs_with_special_tokens([-1])
    if probe.count(-1) != 1:
        return None
    prefix, suffix = probe[: probe.index(-1)], probe[probe.index(-1) + 1 :]
    if tokenizer.build_inputs_with_special_tokens([-1, -2]) != prefix + [-1, -2] + suffix:
        return None
    return prefix, suffix


def _padded(sequences: List[List[int]], pad_id: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """input_ids and attention_mask of sequences padded to the longest."""
    n_steps = max(len(sequence) for sequence in sequences)
    input_ids = numpy.full((len(sequences), n_steps), pad_id, dtype="int64")
    attention_mask = numpy.zeros((len(sequences), n_steps), dtype="int64")
    for i, sequence in enumerate(sequences):
        input_ids[i, : len(sequence)] = sequence
        attention_mask[i, : len(sequence)] = 1
    return input_ids, attention_mask
