"""Long docs, cut into windows: their wordpieces for a transformer
(layers/transformer/wordpieces.py) and their tokens for crf_ner's long_doc_window, both keeping
sentences whole, with a tagger's emission scores over those windows (segment_emissions: crf_ner's
decoding and distillation's teacher read them); TENER's max_length passes no sentence ends, so its
windows only overlap.
Sentence ends themselves (ends_sentence, sentence_cuts) are also read by CharBigramEmbed's
sentence_bigrams and the tagger's sentence_encoding. (Attention limited to nearby tokens, "cs",
is attention_window.)

The NEZHA-BiLSTM-CRF paper cuts long texts at the last full stop before 512
characters. Here a window holds as many whole sentences as fit; a sentence longer
than a window is covered by overlapping windows instead, and each position (a wordpiece
or a token) is read from the window where it sits farthest from an edge. Every one belongs
to exactly one window, so every token gets a vector and nothing is cut off.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import NORM, ORTH, SPACY
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Ints1d

from .backends.batching import batches_by_budget
from .tags import TagSet, preset_constraints

# Characters after which a sentence ends (Chinese and ASCII), newlines included.
SENTENCE_ENDS = frozenset("。！？!?;；\n")
# What window_doc copies from a doc's tokens.
WINDOW_ATTRS = [ORTH, NORM, SPACY]
# At prediction, the most tokens (summed over docs and windows) per model call: bounds the
# memory of the layers' activations on long docs and big batches.
EMISSION_BATCH_TOKENS = 16384
# The most tokens of a long doc's windows per model call: their activations come on top of the
# doc and its emission rows, and set a long doc's peak memory (BENCHMARKS.md#robustness).
WINDOW_BATCH_TOKENS = 4096


# orth id -> ends_sentence(its text), for sentence_cuts: an id is the hash of the text, the same in
# every vocab. Looking the texts up in the StringStore cost sentence_cuts most of its time.
_ENDS_SENTENCE: Dict[int, bool] = {}
# id(doc) -> (doc, its cuts) inside cuts_computed_once (the doc is held, so its id is not reused).
_CUTS_MEMO: ContextVar[Optional[Dict[int, Tuple[Doc, numpy.ndarray]]]] = ContextVar("sentence_cuts", default=None)


def ends_sentence(text: str) -> bool:
    """Whether a token of this text ends a sentence: one of SENTENCE_ENDS, or holding a newline."""
    return text in SENTENCE_ENDS or "\n" in text


@dataclass(frozen=True)
class Window:
    """Positions (wordpieces or tokens) [start, end) are fed to the model; [own_start, own_end)
    are read from it."""

    start: int
    end: int
    own_start: int
    own_end: int


def split_windows(
    sentence_ends: Sequence[int], n_wordpieces: int, max_length: int, every_sentence: bool = False
) -> List[Window]:
    """Windows of at most max_length wordpieces over a doc of n_wordpieces.

    sentence_ends (Sequence[int]): Sorted wordpiece offsets where a sentence ends
        (a cut may go there).
    n_wordpieces (int): The doc's number of wordpieces.
    max_length (int): The most wordpieces a window may hold (>= 2).
    every_sentence (bool): Cut at every sentence end (one sentence per window, as the
        tagger's sentence_encoding reads them), not only where a window is full.
    RETURNS (List[Window]): In order; their owned ranges tile [0, n_wordpieces).
    """
    if max_length < 2:
        raise ValueError(f"Windows need room for at least 2 wordpieces, got max_length {max_length}.")
    cuts = sorted({end for end in sentence_ends if 0 < end < n_wordpieces} | {n_wordpieces})
    windows: List[Window] = []
    start = 0
    cut_index = 0
    while start < n_wordpieces:
        while cuts[cut_index] <= start:
            cut_index += 1
        # The farthest sentence end that fits in one window.
        best = None
        index = cut_index
        while index < len(cuts) and cuts[index] - start <= max_length:
            best = cuts[index]
            index += 1
            if every_sentence:
                break
        if best is not None:
            windows.append(Window(start, best, start, best))
            start = best
        else:
            # One sentence longer than a window: overlapping windows up to its end.
            end = cuts[cut_index]
            windows.extend(_overlapping(start, end, max_length))
            start = end
    return windows


def _overlapping(start: int, end: int, max_length: int) -> List[Window]:
    """Windows over [start, end) with a stride of half a window; ownership splits each overlap in half."""
    stride = max(1, max_length // 2)
    starts = list(range(start, end - max_length, stride)) + [end - max_length]
    spans = [(s, s + max_length) for s in starts]
    windows = []
    own_start = start
    for i, (s, e) in enumerate(spans):
        own_end = end if i == len(spans) - 1 else (spans[i + 1][0] + e) // 2
        windows.append(Window(s, e, own_start, own_end))
        own_start = own_end
    return windows


@contextmanager
def cuts_computed_once(docs: Sequence[Doc] = ()) -> Iterator[None]:
    """Inside it, sentence_cuts computes each doc's cuts once, and the cuts of docs (the forward's
    batch) are computed at once on entry, as stacked_ends reads them: the tagger's forward reads them up
    to three times (its sentence_encoding, CharBigramEmbed's and the n-gram vectors' sentence_bigrams).
    A forward's docs do not change while it runs; the memo is dropped when it returns (a doc may be
    retokenized between two calls). Why not a cache on the Doc: user_data would be serialised with it.
    """
    memo: Dict = {}
    token = _CUTS_MEMO.set(memo)
    try:
        if docs:
            _memo_stacked(memo, docs)
        yield
    finally:
        _CUTS_MEMO.reset(token)


def sentence_cuts(doc: Doc) -> numpy.ndarray:
    """The token offsets 1...len(doc) - 1 after a token that ends a sentence (ends_sentence);
    read-only (inside cuts_computed_once the same array is handed out again)."""
    memo = _CUTS_MEMO.get()
    if memo is None:
        return _per_doc_cuts([doc], *_stacked_cuts([doc]))[0]
    found = memo.get(id(doc))
    if found is None:
        _memo_stacked(memo, [doc])
        found = memo[id(doc)]
    return found[1]


def stacked_ends(docs: Sequence[Doc], sentences: bool) -> numpy.ndarray:
    """Offsets, in the docs' stacked tokens, of the tokens with no right neighbour: each non-empty
    doc's last token and, with sentences, each token that ends a sentence (sentence_cuts), in order."""
    lengths = numpy.asarray([len(doc) for doc in docs], dtype="int64")
    starts = numpy.cumsum(lengths) - lengths
    lasts = (starts + lengths - 1)[lengths > 0]
    if not sentences:
        return lasts
    memo = _CUTS_MEMO.get()
    found = None if memo is None else memo.get(tuple(map(id, docs)))
    cut_before = (found[1] if found is not None else _stacked_cuts(docs)[1]) - 1
    return numpy.concatenate([lasts, cut_before]).astype("int64")


def _memo_stacked(memo: Dict, docs: Sequence[Doc]) -> None:
    """The cuts of docs computed at once, kept for stacked_ends (by the docs' ids) and per doc."""
    starts, cuts = _stacked_cuts(docs)
    memo[tuple(map(id, docs))] = (list(docs), cuts)
    for doc, doc_cuts in zip(docs, _per_doc_cuts(docs, starts, cuts)):
        memo[id(doc)] = (doc, doc_cuts)


def _stacked_cuts(docs: Sequence[Doc]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """(starts, cuts): each doc's first offset in the docs' stacked tokens, and the stacked offsets
    after a token that ends a sentence, but each doc's last, in order. Computed over all docs at once:
    per doc, numpy's calls cost more than their arithmetic."""
    lengths = numpy.asarray([len(doc) for doc in docs], dtype="int64")
    starts = numpy.cumsum(lengths) - lengths
    if not lengths.sum():
        return starts, numpy.zeros((0,), dtype="int64")
    orths = numpy.concatenate([doc.to_array(ORTH).reshape(-1) for doc in docs if len(doc)])
    known = _ENDS_SENTENCE
    if len(known) > 1_000_000:
        known.clear()
    distinct = numpy.unique(orths).tolist()
    unknown = [orth for orth in distinct if orth not in known]
    if unknown:  # looked up in a vocab that holds the string (the docs may come from more than one)
        stores = list({id(doc.vocab): doc.vocab.strings for doc in docs}.values())
        for orth in unknown:
            store = next((strings for strings in stores if orth in strings), stores[0])
            known[orth] = ends_sentence(store[orth])
    end_ids = [orth for orth in distinct if known[orth]]
    is_end = numpy.isin(orths, end_ids)
    is_end[(starts + lengths - 1)[lengths > 0]] = False  # a doc's last token: no cut after it
    return starts, numpy.flatnonzero(is_end).astype("int64") + 1


def _per_doc_cuts(docs: Sequence[Doc], starts: numpy.ndarray, cuts: numpy.ndarray) -> List[numpy.ndarray]:
    """The stacked cuts of _stacked_cuts as each doc's own offsets (read-only intp arrays)."""
    owner = numpy.searchsorted(starts, cuts - 1, side="right") - 1
    local = (cuts - starts[owner]).astype(numpy.intp)
    counts = numpy.bincount(owner, minlength=len(docs))
    pieces = numpy.split(local, numpy.cumsum(counts)[:-1].tolist())
    for piece in pieces:
        piece.flags.writeable = False
    return pieces


def doc_windows(doc: Doc, max_length: int) -> List[Window]:
    """Token windows over a doc, to tag a long doc in pieces (split_windows over tokens).

    A cut goes after a token that ends a sentence (ends_sentence), never inside an
    entity already set on the doc.
    """
    cuts = sentence_cuts(doc)
    inside = numpy.zeros((len(doc) + 1,), dtype=bool)
    for ent in doc.ents:
        inside[ent.start + 1 : ent.end] = True
    return split_windows(cuts[~inside[cuts]].tolist(), len(doc), max_length)


def window_segments(windows: Sequence[Window]) -> List[Tuple[int, int]]:
    """The ranges [start, end) that windows cover end to end: a window that ends at a cut
    alone, a run of overlapping windows (over one long sentence) together.
    """
    segments = []
    start = None
    for window in windows:
        start = window.own_start if start is None else start
        if window.own_end == window.end:
            segments.append((start, window.own_end))
            start = None
    return segments


def window_doc(doc: Doc, window: Window, array: Optional[numpy.ndarray] = None) -> Doc:
    """A new Doc of the tokens window.start...window.end: their texts, spaces and norms.

    Span.as_doc copies every attribute of the whole doc each time (a 1M-token doc cut
    into 2,000 windows took minutes); array, doc.to_array(WINDOW_ATTRS) computed once
    per doc, makes each window cost its own length.
    """
    array = doc.to_array(WINDOW_ATTRS) if array is None else array
    rows = array[window.start : window.end]
    strings = doc.vocab.strings
    words = [strings[orth] for orth in rows[:, 0].tolist()]
    piece = Doc(doc.vocab, words=words, spaces=rows[:, 2].astype(bool).tolist())
    return piece.from_array([NORM], rows[:, 1:2])


@dataclass
class Decoded:
    """The segments (doc index, start token, end token) of a batch and their emissions,
    tag constraints (None: all allowed) and Viterbi paths (None: not decoded)."""

    segments: List[Tuple[int, int, int]]
    emissions: List[Floats2d]
    allowed: Optional[List[Floats2d]]
    paths: Optional[List[Ints1d]]


def segment_emissions(model: Model, docs: List[Doc], tag_set: TagSet, long_doc_window: int) -> Decoded:
    """A tagger's emissions and tag constraints of the docs' segments: whole docs, or a long doc's
    windows, each ending at a sentence end (those over one long sentence together); no paths yet
    (the pipe's decoding.decode adds the CRF's best paths, distillation's teacher its soft targets).

    model (Model): A tagger (emission scores per doc).
    docs (List[Doc]): The docs, with their pre-set entities (the constraints keep them).
    tag_set (TagSet): The CRF's tags.
    long_doc_window (int): A doc of more tokens is tagged in windows of at most this many; 0: whole.
    RETURNS (Decoded): The segments, their emissions and constraints; paths None.
    """
    ops = model.ops
    windows = [
        doc_windows(doc, long_doc_window)
        if long_doc_window and len(doc) > long_doc_window
        else [Window(0, len(doc), 0, len(doc))]
        for doc in docs
    ]
    n_tags = len(tag_set.names)
    emissions = emission_scores(model, docs, windows, n_tags) if any(len(doc) for doc in docs) else []
    ranges = [window_segments(doc_wins) if len(doc) else [] for doc, doc_wins in zip(docs, windows)]
    segments = [(i, start, end) for i, doc_ranges in enumerate(ranges) for start, end in doc_ranges]
    constraints = [
        None if c is None else ops.asarray2f(c)
        for doc, doc_ranges in zip(docs, ranges)
        for c in preset_constraints(doc, doc_ranges, tag_set)
    ]
    allowed = None
    if any(c is not None for c in constraints):
        allowed = [
            c if c is not None else ops.xp.ones((end - start, n_tags), dtype="f")
            for c, (_, start, end) in zip(constraints, segments)
        ]
    return Decoded(segments, [emissions[i][start:end] for i, start, end in segments], allowed, None)


def emission_scores(model: Model, docs: List[Doc], windows: List[List[Window]], n_tags: int) -> List[Floats2d]:
    """The model's emission scores per doc, computed for at most EMISSION_BATCH_TOKENS tokens
    at a time (WINDOW_BATCH_TOKENS for a long doc's windows); each token's row comes from the
    window that owns it. Whole docs and the windows of long docs go to separate model calls
    (each call's docs of similar lengths).
    """
    ops = model.ops
    out: List[Optional[Floats2d]] = [None] * len(docs)
    whole = [(i, w[0]) for i, w in enumerate(windows) if len(w) == 1]
    pieces = [(i, window) for i, w in enumerate(windows) if len(w) > 1 for window in w]
    arrays = {i: docs[i].to_array(WINDOW_ATTRS) for i, w in enumerate(windows) if len(w) > 1}
    for chunk in token_chunks(whole) + token_chunks(pieces, WINDOW_BATCH_TOKENS):
        unit_docs = [docs[i] if i not in arrays else window_doc(docs[i], w, arrays[i]) for i, w in chunk]
        for (i, w), scores in zip(chunk, model.predict(unit_docs)):
            if i not in arrays:
                out[i] = scores
                continue
            if out[i] is None:
                out[i] = ops.alloc2f(len(docs[i]), n_tags)
            out[i][w.own_start : w.own_end] = scores[w.own_start - w.start : w.own_end - w.start]
    return [scores if scores is not None else ops.alloc2f(0, n_tags) for scores in out]


def token_chunks(units: List[Tuple[int, Window]], budget: Optional[int] = None) -> List[List[Tuple[int, Window]]]:
    """Consecutive units (doc index, window) in chunks of at most budget tokens (None:
    EMISSION_BATCH_TOKENS), or one unit."""
    lengths = [window.end - window.start for _, window in units]
    budget = EMISSION_BATCH_TOKENS if budget is None else budget
    return [[units[i] for i in batch] for batch in batches_by_budget(lengths, budget)]
