"""Wordpieces aligned to a doc's tokens, and a long doc's wordpieces cut into windows (long_docs).

Each wordpiece belongs to every token its characters overlap (the tokenizer's offset
mapping); a token's vector is the mean of its wordpieces' (thinc's reduce_mean), read
from the window that owns them.

A batch of docs goes through the tokenizer in one call (a fast tokenizer encodes the batch in
Rust), and the alignment is computed for all of its docs at once with array operations: per
character and per token Python cost the transformer path more than a tiny encoder
(its benchmark: BENCHMARKS.md).
"""

import itertools
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import IDX, LENGTH
from spacy.tokens import Doc
from thinc.api import Model, Ops
from thinc.types import Ints1d

from ...long_docs import Window, ends_sentence, sentence_cuts, split_windows
from ..lexicon_adapter import word_ids


@dataclass
class DocPlan:
    """How one doc is fed to the transformer."""

    input_ids: Ints1d  # the doc's wordpieces, no special tokens
    windows: List[Window]
    token_wordpieces: Ints1d  # wordpiece indices of token 0, then token 1, ...
    token_lengths: Ints1d  # number of wordpieces per token (0 for whitespace)
    # Per wordpiece, the index of the first token it overlaps (of the one before, if none).
    wordpiece_tokens: Ints1d
    # With a lexicon adapter: per wordpiece, the indices of its lexicon words, -1 for none.
    wordpiece_words: Optional[numpy.ndarray] = None


def plan_doc(
    doc: Doc, tokenizer, max_length: int, adapter: Optional[Model] = None, every_sentence: bool = False
) -> DocPlan:
    """plan_docs for one doc."""
    return plan_docs([doc], tokenizer, max_length, adapter, every_sentence)[0]


def plan_docs(
    docs: Sequence[Doc], tokenizer, max_length: int, adapter: Optional[Model] = None, every_sentence: bool = False
) -> List[DocPlan]:
    """Tokenize docs into wordpieces (one tokenizer call), align them to their tokens and split each
    doc into windows (one per sentence with every_sentence, else as many whole sentences as fit).

    The alignment is our own, not spacy-transformers' get_alignment_via_offset_mapping: that
    one gives each token its wordpieces but not each wordpiece its token (which the attention
    window and the entity scale need), and it also maps the character after each token to
    the token, so a wordpiece of a trailing space would join the token before it.

    docs (Sequence[Doc]): The docs.
    tokenizer: The Hugging Face tokenizer (a fast one: the offsets need it).
    max_length (int): The most content wordpieces per window.
    adapter (Optional[Model]): A lexicon adapter: each wordpiece's lexicon words are looked up.
    every_sentence (bool): One window per sentence.
    RETURNS (List[DocPlan]): One plan per doc.
    """
    texts = [doc.text for doc in docs]
    filled = [i for i, text in enumerate(texts) if text]
    ids: List[List[int]] = [[] for _ in docs]
    offsets: List[List[Tuple[int, int]]] = [[] for _ in docs]
    if filled:
        # The docs' wordpieces and their character offsets only: the windows add the special tokens.
        encoding = tokenizer(
            [texts[i] for i in filled],
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
            truncation=False,
            verbose=False,
        )
        for i, doc_ids, doc_offsets in zip(filled, encoding["input_ids"], encoding["offset_mapping"]):
            ids[i], offsets[i] = doc_ids, doc_offsets
    n_wordpieces = numpy.asarray([len(doc_ids) for doc_ids in ids], dtype="int64")
    n_tokens = numpy.asarray([len(doc) for doc in docs], dtype="int64")
    n_chars = numpy.asarray([len(text) for text in texts], dtype="int64")
    # Every doc's characters, tokens and wordpieces stacked, each doc after the one before.
    char_base = numpy.cumsum(n_chars) - n_chars
    token_base = numpy.cumsum(n_tokens) - n_tokens
    wordpiece_base = numpy.cumsum(n_wordpieces) - n_wordpieces
    tokens = _token_chars(docs, char_base)  # shape: (all tokens, 2): first character, length
    spans = numpy.asarray([span for doc_offsets in offsets for span in doc_offsets], dtype="int64").reshape(-1, 2)
    spans = spans + numpy.repeat(char_base, n_wordpieces)[:, None]
    first, last = _overlapped_tokens(tokens, spans, int(n_chars.sum()))
    overlapping = first <= last
    # (wordpiece, token) pairs, every token a wordpiece overlaps, in wordpiece order
    counts = numpy.where(overlapping, last - first + 1, 0)
    pair_wordpiece = numpy.repeat(numpy.arange(len(spans)), counts)
    pair_token = numpy.repeat(first, counts) + _ranks(counts)
    by_token = numpy.argsort(pair_token, kind="stable")  # token order; each token's wordpieces in order
    token_wordpieces = pair_wordpiece[by_token] - numpy.repeat(wordpiece_base, n_wordpieces)[pair_wordpiece[by_token]]
    token_lengths = numpy.bincount(pair_token, minlength=int(n_tokens.sum()))
    wordpiece_tokens = _wordpiece_tokens(first, overlapping, wordpiece_base, n_wordpieces, token_base)
    token_ends = tokens.sum(axis=1) if len(tokens) else numpy.zeros((0,), dtype="int64")
    starts = spans[:, 0]
    # Each doc's pairs are contiguous in token order (its tokens come after the previous doc's).
    doc_of_token = numpy.repeat(numpy.arange(len(docs)), n_tokens)
    pair_end = numpy.cumsum(numpy.bincount(doc_of_token[pair_token], minlength=len(docs)))
    all_ids = numpy.fromiter(itertools.chain.from_iterable(ids), dtype="int64", count=int(n_wordpieces.sum()))
    token_wordpieces, token_lengths = token_wordpieces.astype("int32"), token_lengths.astype("int32")
    plans = []
    bounds = zip(
        (wordpiece_base + n_wordpieces).tolist(),
        wordpiece_base.tolist(),
        (pair_end - numpy.diff(pair_end, prepend=0)).tolist(),
        pair_end.tolist(),
        token_base.tolist(),
        (token_base + n_tokens).tolist(),
    )
    for i, (doc, (end, base, pairs_from, pairs_to, tokens_from, tokens_to)) in enumerate(zip(docs, bounds)):
        n = end - base
        if n <= max_length and not every_sentence:
            windows = [Window(0, n, 0, n)] if n else []  # what split_windows gives, without its sentence ends
        else:
            # A cut may go after a token that ends a sentence: at the first wordpiece that starts after it.
            ends = sentence_cuts(doc) - 1
            if len(doc) and ends_sentence(doc[-1].text):
                ends = numpy.append(ends, len(doc) - 1)
            cut_chars = token_ends[tokens_from:tokens_to][ends]
            sentence_ends = numpy.searchsorted(starts[base:end], cut_chars).tolist()
            windows = split_windows(sentence_ends, n, max_length, every_sentence)
        plans.append(
            DocPlan(
                all_ids[base:end],
                windows,
                token_wordpieces[pairs_from:pairs_to],
                token_lengths[tokens_from:tokens_to],
                wordpiece_tokens[base:end],
                None if adapter is None else word_ids(adapter, doc.text, offsets[i]),
            )
        )
    return plans


def token_rows(ops: Ops, plans: List[DocPlan], windows, row_of_window) -> Tuple[Ints1d, Ints1d]:
    """For every token's wordpieces, the row of all_rows that holds it (read from its owning window).

    windows: (doc index, Window) of every plan's windows, in order; row_of_window: window index -> row of
    its first content wordpiece in all_rows.
    """
    if not plans:
        empty = numpy.zeros((0,), dtype="i")
        return ops.asarray1i(empty), ops.asarray1i(empty)
    n_wordpieces = numpy.asarray([len(plan.input_ids) for plan in plans], dtype="int64")
    wordpiece_base = numpy.cumsum(n_wordpieces) - n_wordpieces
    # The owned ranges of a doc's windows tile its wordpieces in order, so the windows' owned ranges
    # tile the stacked wordpieces: each wordpiece's row is its window's row of wordpiece 0 plus its index.
    owned = numpy.asarray([window.own_end - window.own_start for _, window in windows], dtype="int64")
    window_zero = numpy.asarray(
        [row_of_window[k] - window.start for k, (_, window) in enumerate(windows)], dtype="int64"
    )
    local = numpy.arange(int(n_wordpieces.sum())) - numpy.repeat(wordpiece_base, n_wordpieces)
    rows = numpy.repeat(window_zero, owned) + local
    gather = numpy.concatenate([plan.token_wordpieces + base for plan, base in zip(plans, wordpiece_base.tolist())])
    lengths = numpy.concatenate([plan.token_lengths for plan in plans])
    return ops.asarray1i(rows[gather].astype("i")), ops.asarray1i(lengths.astype("i"))


def _token_chars(docs: Sequence[Doc], char_base: numpy.ndarray) -> numpy.ndarray:
    """(first character in the stacked texts, length) of every token of the docs, (n_tokens, 2) int64."""
    arrays = [doc.to_array([IDX, LENGTH]).astype("int64") for doc in docs if len(doc)]
    if not arrays:
        return numpy.zeros((0, 2), dtype="int64")
    tokens = numpy.concatenate(arrays)
    tokens[:, 0] += numpy.repeat(char_base, [len(doc) for doc in docs])
    return tokens


def _overlapped_tokens(
    tokens: numpy.ndarray, spans: numpy.ndarray, n_chars: int
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The first and last token each character span [start, end) overlaps (first > last: none).

    Tokens are contiguous and in order, each of at least one character: the tokens a span overlaps are
    those from the token of its first covered character to the token of its last one.
    """
    # shape: (n_chars,), the token of each character, -1 for characters of no token (spaces after a token)
    char_token = numpy.full((n_chars + 1,), -1, dtype="int64")
    char_token[numpy.repeat(tokens[:, 0], tokens[:, 1]) + _ranks(tokens[:, 1])] = numpy.repeat(
        numpy.arange(len(tokens)), tokens[:, 1]
    )
    covered = char_token >= 0
    positions = numpy.arange(n_chars + 1)
    # The nearest covered character at or after (before) each one; n_chars (-1) where there is none.
    next_covered = numpy.minimum.accumulate(numpy.where(covered, positions, n_chars)[::-1])[::-1]
    previous_covered = numpy.maximum.accumulate(numpy.where(covered, positions, -1))
    starts, ends = spans[:, 0], spans[:, 1]
    first_char = next_covered[starts]
    last_char = previous_covered[numpy.maximum(ends - 1, 0)]
    some = (ends > starts) & (first_char < ends) & (last_char >= starts)
    first = numpy.where(some, char_token[numpy.minimum(first_char, n_chars)], 0)
    last = numpy.where(some, char_token[numpy.maximum(last_char, 0)], -1)
    return first, last


def _wordpiece_tokens(
    first: numpy.ndarray,
    overlapping: numpy.ndarray,
    wordpiece_base: numpy.ndarray,
    n_wordpieces: numpy.ndarray,
    token_base: numpy.ndarray,
) -> numpy.ndarray:
    """Per stacked wordpiece, its doc's index of the first token it overlaps; one that overlaps none
    takes the wordpiece before it's (0 at a doc's start)."""
    local = first - numpy.repeat(token_base, n_wordpieces)
    known = overlapping.copy()
    doc_starts = wordpiece_base[n_wordpieces > 0]
    local[doc_starts] = numpy.where(known[doc_starts], local[doc_starts], 0)
    known[doc_starts] = True  # a doc's first wordpiece is always set, so no value crosses into the next doc
    source = numpy.maximum.accumulate(numpy.where(known, numpy.arange(len(local)), 0)) if len(local) else local
    return local[source].astype("int64")


def _ranks(counts: numpy.ndarray) -> numpy.ndarray:
    """0, 1, ..., count - 1 for each count, concatenated."""
    counts = numpy.asarray(counts, dtype="int64")
    total = int(counts.sum())
    return numpy.arange(total) - numpy.repeat(numpy.cumsum(counts) - counts, counts)
