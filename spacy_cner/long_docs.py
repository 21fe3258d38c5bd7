"""Long docs, cut into windows: their wordpieces for a transformer
(layers/transformer/wordpieces.py) and their tokens for crf_ner's long_doc_window, both keeping
sentences whole; TENER's max_length passes no sentence ends, so its windows only overlap.
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

# Characters after which a sentence ends (Chinese and ASCII), newlines included.
SENTENCE_ENDS = frozenset("。！？!?;；\n")
# What window_doc copies from a doc's tokens.
WINDOW_ATTRS = [ORTH, NORM, SPACY]


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
    per doc, numpy's calls cost more than their arithmetic (2-4% of the tagger's time)."""
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
