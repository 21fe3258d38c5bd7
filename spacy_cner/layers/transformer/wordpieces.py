"""Wordpieces aligned to a doc's tokens, and a long doc's wordpieces cut into windows (long_docs).

Each wordpiece belongs to every token its characters overlap (the tokenizer's offset
mapping); a token's vector is the mean of its wordpieces' (thinc's reduce_mean), read
from the window that owns them.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from thinc.api import Model, Ops
from thinc.types import Ints1d

from ...long_docs import Window, ends_sentence, split_windows
from ..lexicon_adapter import word_ids


@dataclass
class DocPlan:
    """How one doc is fed to the transformer."""

    input_ids: List[int]  # the doc's wordpieces, no special tokens
    windows: List[Window]
    token_wordpieces: Ints1d  # wordpiece indices of token 0, then token 1, ...
    token_lengths: Ints1d  # number of wordpieces per token (0 for whitespace)
    # Per wordpiece, the index of the first token it overlaps (of the one before, if none).
    wordpiece_tokens: List[int]
    # With a lexicon adapter: per wordpiece, the indices of its lexicon words, -1 for none.
    wordpiece_words: Optional[numpy.ndarray] = None


def plan_doc(
    doc: Doc, tokenizer, max_length: int, adapter: Optional[Model] = None, every_sentence: bool = False
) -> DocPlan:
    """Tokenize a doc into wordpieces, align them to its tokens and split it into windows
    (one per sentence with every_sentence, else as many whole sentences as fit).

    The alignment is our own, not spacy-transformers' get_alignment_via_offset_mapping: that
    one gives each token its wordpieces but not each wordpiece its token (which the attention
    window and the entity scale need), and it also maps the character after each token to
    the token, so a wordpiece of a trailing space would join the token before it.
    """
    if not doc.text:
        empty = numpy.zeros((0,), dtype="i")
        return DocPlan([], [], empty, numpy.zeros((len(doc),), dtype="i"), [])
    # The doc's wordpieces and their character offsets only: the windows add the special tokens.
    encoding = tokenizer(
        doc.text,
        add_special_tokens=False,
        return_offsets_mapping=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=False,
        verbose=False,
    )
    offsets = encoding["offset_mapping"]
    char_to_token = [-1] * len(doc.text)
    for token in doc:
        char_to_token[token.idx : token.idx + len(token.text)] = [token.i] * len(token.text)
    token_wordpieces: List[List[int]] = [[] for _ in doc]
    wordpiece_tokens: List[int] = []
    for j, (start, end) in enumerate(offsets):
        # A wordpiece belongs to every token it overlaps (usually one character).
        overlapped = [t for t in sorted(set(char_to_token[start:end])) if t >= 0]
        for t in overlapped:
            token_wordpieces[t].append(j)
        wordpiece_tokens.append(overlapped[0] if overlapped else (wordpiece_tokens[-1] if wordpiece_tokens else 0))
    starts = numpy.asarray([start for start, _ in offsets], dtype="i")
    # A cut may go after a token that ends a sentence.
    sentence_ends = [
        int(numpy.searchsorted(starts, token.idx + len(token.text))) for token in doc if ends_sentence(token.text)
    ]
    windows = split_windows(sentence_ends, len(offsets), max_length, every_sentence)
    flat = [j for wordpieces in token_wordpieces for j in wordpieces]
    return DocPlan(
        list(encoding["input_ids"]),
        windows,
        numpy.asarray(flat, dtype="i"),
        numpy.asarray([len(w) for w in token_wordpieces], dtype="i"),
        wordpiece_tokens,
        None if adapter is None else word_ids(adapter, doc.text, offsets),
    )


def token_rows(ops: Ops, plans: List[DocPlan], windows, row_of_window) -> Tuple[Ints1d, Ints1d]:
    """For every token's wordpieces, the row of all_rows that holds it (read from its owning window)."""
    gathers = []
    window_index = 0
    for plan in plans:
        rows = numpy.zeros((len(plan.input_ids),), dtype="i")
        for window in plan.windows:
            first = row_of_window[window_index] - window.start
            rows[window.own_start : window.own_end] = first + numpy.arange(window.own_start, window.own_end)
            window_index += 1
        gathers.append(rows[plan.token_wordpieces])
    gather = numpy.concatenate(gathers) if gathers else numpy.zeros((0,), dtype="i")
    lengths = numpy.concatenate([plan.token_lengths for plan in plans]) if plans else numpy.zeros((0,), dtype="i")
    return ops.asarray1i(gather), ops.asarray1i(lengths)
