"""Frozen character and bigram vectors read from the pipeline's vocab, looked up in bulk."""

from collections import OrderedDict
from typing import Callable, List, Optional, Tuple

import numpy
from spacy.attrs import LENGTH, ORTH
from spacy.strings import get_string_id
from spacy.tokens import Doc
from spacy.vectors import Vectors
from thinc.api import Model
from thinc.types import Floats2d

from ..long_docs import sentence_cuts, stacked_ends

# Odd multiplier that mixes a bigram's left character's key into its key (wraps in uint64).
_PAIR_MIX = numpy.uint64(0x9E37_79B9_7F4A_7C15)
# The bulk indexes of the last few vectors tables seen (a pipeline has one).
_INDEXES: "OrderedDict[int, _VectorIndex]" = OrderedDict()
_MAX_INDEXES = 4
# An int8 vectors table (spacy-cner.lac_vectors.v1's dtype "int8") holds each column scaled into [-1, 1]
# in steps of 1/127: read as its values times INT8_STEP.
INT8_STEP = 1.0 / 127


def float32_rows(data, xp=numpy):
    """Rows of a vectors table (or the whole table) as float32: an int8 table's values times INT8_STEP
    (its columns scaled into [-1, 1], see spacy-cner.lac_vectors.v1), float16 and float32 as they are."""
    rows = xp.asarray(data, dtype="float32")
    if data.dtype == numpy.int8:
        rows *= INT8_STEP
    return rows


def ngram_vectors(prev_bigram: bool, sentence_bigrams: bool = False) -> Model[List[Doc], List[Floats2d]]:
    """Per doc, the vocab's vectors (n_tokens, 2 or 3 times their width) of each token's
    text, of its next bigram and, with prev_bigram, of its previous bigram.

    Texts, not norms (spaCy's norm of "。" is "."), as vector files key them; bigrams are
    the two texts joined ("张三"), none at the doc's edges (nor, with
    sentence_bigrams, across a sentence end); a missing one, or one the table lacks, is
    zeros. The vectors are frozen: no gradient, and they stay in the vocab (saved with
    the pipeline), as spaCy's StaticVectors keeps them.
    """
    attrs = {"prev_bigram": prev_bigram, "sentence_bigrams": sentence_bigrams}
    return Model("char_bigram_vectors", _forward, init=_init, attrs=attrs)


def _init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    if X and not X[0].vocab.vectors.shape[0]:
        raise ValueError(
            "CharBigramEmbed has static_vectors = true but the pipeline has no vectors: set "
            "[initialize] vectors (e.g. --paths.vectors) to a vectors model made with "
            "`spacy init vectors zh VECTORS.txt OUTPUT`."
        )
    if X:
        model.attrs["vectors_width"] = int(X[0].vocab.vectors.shape[1])


def _check_vectors(model: Model, vectors: Vectors) -> None:
    """A clear error where the docs' vocab lacks the vectors the model was trained with (a crf_ner sourced
    into another pipeline: spaCy's add_pipe(source=...) takes the component, not the source's vectors)."""
    width = model.attrs.get("vectors_width")
    if not vectors.shape[0] or (width is not None and vectors.shape[1] != width):
        raise ValueError(
            f"The model reads static vectors{f' of width {width}' if width else ''} (CharBigramEmbed's "
            f"static_vectors), but this pipeline's vocab has vectors of shape {vectors.shape}. A crf_ner added with "
            "nlp.add_pipe('crf_ner', source=trained) needs the trained pipeline's vectors too: "
            "nlp.vocab.vectors = trained.vocab.vectors (or load the trained pipeline and add your components to it)."
        )


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    ops = model.ops
    prev_bigram, sentence_bigrams = model.attrs["prev_bigram"], model.attrs["sentence_bigrams"]
    if not docs:
        return [], lambda dY: []
    vectors = docs[0].vocab.vectors
    _check_vectors(model, vectors)
    if vectors.mode == "floret":
        return [ops.asarray2f(_floret_vectors(doc, prev_bigram, sentence_bigrams)) for doc in docs], lambda dY: []
    # One lookup and one gather for the whole batch: a doc's rows are the same alone or in it.
    rows = _vector_index(vectors).batch_rows(docs, prev_bigram, sentence_bigrams)
    xp_rows = ops.xp.asarray(rows)
    found = ops.asarray(vectors.data)[ops.xp.maximum(xp_rows, 0)]  # (n_tokens, columns, width)
    found[xp_rows < 0] = 0
    found = float32_rows(found.reshape((rows.shape[0], rows.shape[1] * vectors.shape[1])), ops.xp)
    ends = numpy.cumsum([len(doc) for doc in docs])
    return [found[end - len(doc) : end] for doc, end in zip(docs, ends)], lambda dY: []


def bigram_texts(doc: Doc, sentence_bigrams: bool) -> List[str]:
    """The text of each token joined with the next one's: "" after the doc's last token and,
    with sentence_bigrams, after a token that ends a sentence."""
    texts = [token.text for token in doc]
    joins = [a + b for a, b in zip(texts, texts[1:])] + ([""] if texts else [])
    if sentence_bigrams:
        for cut in sentence_cuts(doc):
            joins[cut - 1] = ""
    return joins


def _floret_vectors(doc: Doc, prev_bigram: bool, sentence_bigrams: bool) -> numpy.ndarray:
    """floret vectors exist for every string (hashed subwords): looked up by text."""
    vectors = doc.vocab.vectors
    joins = bigram_texts(doc, sentence_bigrams)
    columns = [[token.text for token in doc], joins]
    if prev_bigram:
        columns.append([""] + joins[:-1] if joins else [])
    blocks = []
    for strings in columns:
        found = numpy.zeros((len(strings), vectors.shape[1]), dtype="float32")
        if strings:
            found[:] = vectors.get_batch(strings)
            found[[not s for s in strings]] = 0
        blocks.append(found)
    return numpy.hstack(blocks)


class _VectorIndex:
    """The rows of a (non-floret) Vectors table for token keys and for pairs of token keys, as
    sorted arrays searched in bulk.

    Why not Vectors.find: it looks keys up one by one in Python (about 1.2 us a key) and a
    bigram's key needs its joined text hashed first; here a doc's characters and bigrams are
    found with a few numpy calls. A pair table maps (left ORTH, right ORTH) to the row of the
    key of their joined text, for every key whose text splits into two one-character texts; a
    bigram of longer tokens, or of a pair whose mixed key two pairs share, is looked up by its
    joined text, so the rows are exactly Vectors.find's. Built once per table and rebuilt when
    its keys or data change size.
    """

    def __init__(self, vectors: Vectors):
        self.vectors = vectors  # kept, so that its id is not reused while this index lives
        self.signature = _signature(vectors)
        key2row = vectors.key2row
        keys = numpy.fromiter(key2row.keys(), dtype="uint64", count=len(key2row))
        rows = numpy.fromiter(key2row.values(), dtype="int64", count=len(key2row))
        order = numpy.argsort(keys, kind="stable")
        self.keys, self.rows = keys[order], rows[order]
        pairs, pair_rows, complete = [], [], True
        strings = vectors.strings
        for key, row in key2row.items():
            try:
                text = strings[key]
            except (KeyError, IndexError):
                complete = False  # a key without its text: bigrams are looked up by their text
                break
            if len(text) == 2:
                pairs.append(text)
                pair_rows.append(row)
        # Each character's key hashed once, not once per pair it is in.
        char_ids = {char: get_string_id(char) for char in {char for pair in pairs for char in pair}}
        left = [char_ids[pair[0]] for pair in pairs]
        right = [char_ids[pair[1]] for pair in pairs]
        self.pairs = complete
        left_keys = numpy.asarray(left, dtype="uint64")
        right_keys = numpy.asarray(right, dtype="uint64")
        mixed = left_keys * _PAIR_MIX + right_keys
        order = numpy.argsort(mixed, kind="stable")
        mixed, self.pair_left, self.pair_right = mixed[order], left_keys[order], right_keys[order]
        self.pair_rows = numpy.asarray(pair_rows, dtype="int64")[order]
        shared = mixed[1:] == mixed[:-1]
        self.ambiguous = numpy.unique(mixed[1:][shared])
        self.pair_keys = mixed

    def find(self, keys: numpy.ndarray) -> numpy.ndarray:
        """The rows of uint64 keys, -1 for a key without one."""
        return _search(self.keys, self.rows, keys)

    def doc_rows(self, doc: Doc, prev_bigram: bool, sentence_bigrams: bool) -> numpy.ndarray:
        """The rows (n_tokens, 2 or 3) of the doc's tokens, next bigrams and (prev_bigram)
        previous bigrams; -1 where the table has none (or at an edge, or across a sentence end)."""
        return self.batch_rows([doc], prev_bigram, sentence_bigrams)

    def batch_rows(self, docs: List[Doc], prev_bigram: bool, sentence_bigrams: bool) -> numpy.ndarray:
        """doc_rows of each doc, stacked (sum of the docs' lengths, 2 or 3): found in one search."""
        lengths = numpy.asarray([len(doc) for doc in docs], dtype="int64")
        n = int(lengths.sum())
        rows = numpy.full((n, 3 if prev_bigram else 2), -1, dtype="int64")
        if not n:
            return rows
        starts = numpy.cumsum(lengths) - lengths
        lasts = (starts + lengths - 1)[lengths > 0]  # each non-empty doc's last token
        attrs = numpy.concatenate([doc.to_array([ORTH, LENGTH]).reshape((-1, 2)) for doc in docs if len(doc)])
        attrs = attrs.astype("uint64")
        orths, token_lengths = attrs[:, 0], attrs[:, 1]
        rows[:, 0] = self.find(orths)
        if n > 1:
            rows[:-1, 1] = self._bigram_rows(docs, starts, lasts, orths, token_lengths)
        rows[stacked_ends(docs, sentence_bigrams), 1] = -1  # a doc's (or sentence's) last token: no bigram
        if prev_bigram:
            rows[1:, 2] = rows[:-1, 1]  # a doc's first token reads its previous doc's last: -1
        return rows

    def _bigram_rows(
        self, docs: List[Doc], starts: numpy.ndarray, lasts: numpy.ndarray, orths: numpy.ndarray, lengths: numpy.ndarray
    ) -> numpy.ndarray:
        """The rows of the n - 1 bigrams (token i, token i + 1) of the stacked docs, -1 where the
        table has none; those across two docs (after a doc's last token, `lasts`) are set to -1 by
        the caller and not looked up here."""
        left, right = orths[:-1], orths[1:]
        slow = numpy.ones(left.shape, dtype=bool)
        rows = numpy.full(left.shape, -1, dtype="int64")
        if self.pairs:
            mixed = left * _PAIR_MIX + right
            index = numpy.minimum(numpy.searchsorted(self.pair_keys, mixed), max(len(self.pair_keys) - 1, 0))
            if len(self.pair_keys):
                hit = (
                    (self.pair_keys[index] == mixed)
                    & (self.pair_left[index] == left)
                    & (self.pair_right[index] == right)
                )
                rows[hit] = self.pair_rows[index[hit]]
            slow = (lengths[:-1] != 1) | (lengths[1:] != 1)
            if len(self.ambiguous):
                slow |= numpy.isin(mixed, self.ambiguous)
        slow[lasts[lasts < len(slow)]] = False  # across two docs: no bigram
        positions = numpy.flatnonzero(slow)
        if len(positions):
            owners = numpy.searchsorted(starts, positions, side="right") - 1
            texts = []
            for position, owner in zip(positions.tolist(), owners.tolist()):
                doc, i = docs[owner], position - int(starts[owner])
                texts.append(doc[i].text + doc[i + 1].text)
            rows[positions] = self.find(numpy.asarray([get_string_id(text) for text in texts], dtype="uint64"))
        return rows


def _search(sorted_keys: numpy.ndarray, values: numpy.ndarray, keys: numpy.ndarray) -> numpy.ndarray:
    if not len(sorted_keys):
        return numpy.full(keys.shape, -1, dtype="int64")
    index = numpy.minimum(numpy.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return numpy.where(sorted_keys[index] == keys, values[index], -1)


def _signature(vectors: Vectors) -> Tuple:
    data = vectors.data
    return (len(vectors.key2row), tuple(data.shape), id(data))


def _vector_index(vectors: Vectors) -> _VectorIndex:
    index = _INDEXES.get(id(vectors))
    if index is None or index.vectors is not vectors or index.signature != _signature(vectors):
        index = _INDEXES[id(vectors)] = _VectorIndex(vectors)
        while len(_INDEXES) > _MAX_INDEXES:
            _INDEXES.popitem(last=False)
    _INDEXES.move_to_end(id(vectors))
    return index
