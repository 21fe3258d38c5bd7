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
def cuts_computed_once() -> Iterator[None]:
    """Inside it, sentence_cuts computes each doc's cuts once: the tagger's forward reads them up to
    three times (its sentence_encoding, CharBigramEmbed's and the n-gram vectors' sentence_bigrams).
    A forward's docs do not change while it runs; the memo is dropped when it returns (a doc may be
    retokenized between two calls). Why not a cache on the Doc: user_data would be serialised with it.
    """
    token = _CUTS_MEMO.set({})
    try:
        yield
    finally:
        _CUTS_MEMO.reset(token)


def sentence_cuts(doc: Doc) -> numpy.ndarray:
    """The token offsets 1...len(doc) - 1 after a token that ends a sentence (ends_sentence);
    read-only (inside cuts_computed_once the same array is handed out again)."""
    memo = _CUTS_MEMO.get()
    if memo is None:
        return _sentence_cuts(doc)
    found = memo.get(id(doc))
    if found is None:
        found = memo[id(doc)] = (doc, _sentence_cuts(doc))
    return found[1]


def stacked_ends(docs: Sequence[Doc], sentences: bool) -> numpy.ndarray:
    """Offsets, in the docs' stacked tokens, of the tokens with no right neighbour: each non-empty
    doc's last token and, with sentences, each token that ends a sentence (sentence_cuts)."""
    lengths = numpy.asarray([len(doc) for doc in docs], dtype="int64")
    starts = numpy.cumsum(lengths) - lengths
    ends = [(starts + lengths - 1)[lengths > 0]]
    if sentences:
        ends += [start + sentence_cuts(doc) - 1 for doc, start in zip(docs, starts.tolist()) if len(doc) > 1]
    return numpy.concatenate(ends).astype("int64")


def _sentence_cuts(doc: Doc) -> numpy.ndarray:
    orths = doc.to_array(ORTH).reshape(-1)
    strings, known = doc.vocab.strings, _ENDS_SENTENCE
    if len(known) > 1_000_000:
        known.clear()
    end_ids = []
    for orth in numpy.unique(orths).tolist():
        ends = known.get(orth)
        if ends is None:
            ends = known[orth] = ends_sentence(strings[orth])
        if ends:
            end_ids.append(orth)
    # The tokens that end a sentence, but the doc's last: a cut goes after each.
    cuts = (numpy.flatnonzero(numpy.isin(orths[:-1], end_ids)) + 1).astype(numpy.intp)
    cuts.flags.writeable = False
    return cuts


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
