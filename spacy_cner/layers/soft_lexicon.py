"""SoftLexicon features (Ma et al., ACL 2020, section 3.2) without word vectors, and softword.

For each character c, the lexicon words that cover it fall into four sets by the
position of c in the word: B (first), M (inside), E (last), S (a one-character word).
SoftLexicon embeds each set as the frequency-weighted average of its words' vectors
(eq. 10: v(S) = 4/Z sum_w z(w) e(w), Z summed over all four sets). Words a model has no
trained vector for carry information too, through where and how often they match, so
here a set is described by what is known without vectors:
    share[p]      = 4/Z sum_{w in set p} z(w),  z(w) = 1 + log(1 + frequency(w))   (eq. 10, e(w) = 1)
    present[p, g] = 1 if set p holds a word of gazetteer type g (g = 0: any word)
The types come from the lexicon's tags (Lexicon.entity_types: jieba's nr/ns/nt/nz
part-of-speech tags as PER/LOC/ORG/MISC, or a user gazetteer's labels). With softword,
c's position (B/M/E/S) in jieba's segmentation of the text is added (Zhang and Yang 2018).
The features have no weights: the tok2vec's mixing layer learns what they mean.
"""
import logging
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from thinc.api import Model, registry
from thinc.types import Floats2d

from ..lexicon import Lexicon, doc_text, token_spans
from ..segmenter import jieba_words, load_jieba
from .lexicon_adapter import LexiconSlot, required_lexicon

# Word positions, in feature order.
POSITIONS = ("B", "M", "E", "S")
B, M, E, S = range(len(POSITIONS))


@registry.layers("spacy-cner.SoftLexicon.v1")
def SoftLexicon(softword: bool = False) -> Model[List[Doc], List[Floats2d]]:
    """Per token, SoftLexicon's B/M/E/S word sets as frequency shares and gazetteer types.

    The lexicon comes from the pipe's initialize, as for spacy-cner.LexiconAdapter.v1
    ([initialize.components.crf_ner.lexicon], e.g. jieba's dictionary with its tags, plus
    typed gazetteers); the pipe saves it and gives it back on loading. Use it as the
    soft_lexicon of spacy-cner.CharBigramEmbed.v1.

    softword (bool): Add each character's position in jieba's segmentation of the text
        (needs jieba: pip install 'spacy-cner[jieba]').
    RETURNS (Model[List[Doc], List[Floats2d]]): Features (n_tokens, nO) per doc, nO set at
        initialize: 4 + 4 * n_types (+ 4 with softword).
    """
    return Model(
        "soft_lexicon",
        forward,
        init=init,
        dims={"nO": None},
        attrs={"lexicon": LexiconSlot(), "softword": softword, "last_batch": LastBatch()},
    )


def init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    lexicon = required_lexicon(model)
    if lexicon.vectors is not None:
        warnings.warn(
            "The soft lexicon reads its lexicon's words, frequencies and tags, not its word vectors: "
            "use spacy-cner.LexiconAdapter.v1 to use the vectors, or a word list to save the space.",
            stacklevel=2,
        )
    if model.attrs["softword"]:
        load_jieba()
    n_types = len(lexicon.entity_types()[0])
    model.set_dim("nO", len(POSITIONS) * (1 + n_types) + (len(POSITIONS) if model.attrs["softword"] else 0), force=True)


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    lexicon = required_lexicon(model)
    width = model.get_dim("nO")
    texts, spans = [doc_text(doc) for doc in docs], [token_spans(doc) for doc in docs]
    values = model.attrs["last_batch"].features(
        lexicon, texts, spans, lambda: batch_features(lexicon, texts, spans, model.attrs["softword"])
    )
    if values and values[0].shape[1] != width:
        raise ValueError(
            f"The soft lexicon gives {values[0].shape[1]} features per token but the model was built for "
            f"{width}: its lexicon has other gazetteer types than at initialize."
        )
    return [model.ops.asarray2f(doc_values) for doc_values in values], lambda d_features: []


class LastBatch:
    """The features of the last batch a SoftLexicon layer computed, with what they were computed from.

    An adversarial update (spacy-cner.fgm.v1) runs the model twice on the same docs, and the
    features depend only on the texts, the tokens' character spans and the lexicon: the second
    pass reuses them (matching and jieba's segmentation took 7% of a training step). Not saved.
    """

    def __init__(self) -> None:
        # (lexicon, texts, spans as bytes, features), replaced whole so that threads sharing
        # the model never read one batch's key with another's features.
        self._entry: Optional[Tuple[Lexicon, List[str], List[bytes], List[numpy.ndarray]]] = None

    def features(
        self, lexicon: Lexicon, texts: List[str], spans: List[numpy.ndarray], compute: Callable[[], List[numpy.ndarray]]
    ) -> List[numpy.ndarray]:
        """The stored features if they were computed from these texts, spans and lexicon, else compute()'s, stored."""
        entry, span_bytes = self._entry, _span_bytes(spans)
        if entry is not None and entry[0] is lexicon and entry[1] == texts and entry[2] == span_bytes:
            return entry[3]
        values = compute()
        self._entry = (lexicon, list(texts), span_bytes, values)
        return values

    def __getstate__(self) -> Dict:
        return {"_entry": None}


def _span_bytes(spans: List[numpy.ndarray]) -> List[bytes]:
    return [numpy.asarray(doc_spans, dtype="int64").tobytes() for doc_spans in spans]


def batch_features(
    lexicon: Lexicon, texts: Sequence[str], spans: Sequence[numpy.ndarray], softword: bool
) -> List[numpy.ndarray]:
    """token_features for many texts in one pass over their concatenation (a newline between:
    no lexicon word holds whitespace, and jieba segments the parts apart), a few times faster
    on short docs than one by one. spans: per text, (n_tokens, 2) character spans."""
    joined = "\n".join(texts)
    offsets = numpy.cumsum([0] + [len(text) + 1 for text in texts[:-1]])
    shifted = []
    for doc_spans, offset in zip(spans, offsets):
        doc_spans = numpy.asarray(doc_spans, dtype="int64").reshape(-1, 2)
        shifted.append(numpy.where((doc_spans[:, 1] > doc_spans[:, 0])[:, None], doc_spans + offset, doc_spans))
    flat = token_features(lexicon, joined, numpy.concatenate(shifted) if shifted else numpy.zeros((0, 2), "int64"), softword)
    bounds = numpy.cumsum([0] + [len(doc_spans) for doc_spans in shifted])
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(texts))]


def token_features(lexicon: Lexicon, text: str, spans: Sequence[Tuple[int, int]], softword: bool) -> numpy.ndarray:
    """The features of each (start, end) character span of text (a token): the mean over its
    characters; an empty span (whitespace) gets zeros.

    RETURNS (numpy.ndarray): float32 (len(spans), 4 + 4 * n_types (+ 4 with softword)).
    """
    per_char = char_features(lexicon, text)
    if softword:
        per_char = numpy.hstack([per_char, softword_positions(text)])
    bounds = numpy.asarray(spans, dtype="int64").reshape(-1, 2)
    out = numpy.zeros((len(spans), per_char.shape[1]), dtype="float32")
    single = bounds[:, 1] - bounds[:, 0] == 1
    out[single] = per_char[bounds[single, 0]]
    for i in numpy.flatnonzero(bounds[:, 1] - bounds[:, 0] > 1):
        out[i] = per_char[bounds[i, 0] : bounds[i, 1]].mean(axis=0)
    return out


def char_features(lexicon: Lexicon, text: str) -> numpy.ndarray:
    """Per character: share[4], then present[4, n_types] (see the module docstring).

    RETURNS (numpy.ndarray): float32 (len(text), 4 + 4 * n_types).
    """
    types, word_types = lexicon.entity_types()
    n_types = len(types)
    shares = numpy.zeros((len(text), len(POSITIONS)), dtype="float32")
    present = numpy.zeros((len(text), len(POSITIONS), n_types), dtype="float32")
    matches = numpy.asarray(lexicon.find(text), dtype="int64").reshape(-1, 3)
    if len(matches):
        starts, ends, ids = matches.T
        lengths = ends - starts
        # One row per (matched word, character it covers).
        word = numpy.repeat(numpy.arange(len(matches)), lengths)
        offset = numpy.arange(len(word)) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
        char = starts[word] + offset
        length = lengths[word]
        position = numpy.where(length == 1, S, numpy.where(offset == 0, B, numpy.where(offset == length - 1, E, M)))
        if lexicon.frequencies is None:
            weights = numpy.ones(len(matches), dtype="float32")
        else:
            weights = 1.0 + numpy.log1p(numpy.maximum(lexicon.frequencies[ids], 0)).astype("float32")
        numpy.add.at(shares, (char, position), weights[word])
        total = shares.sum(axis=1, keepdims=True)
        numpy.divide(shares * len(POSITIONS), total, out=shares, where=total > 0)
        present[char, position, 0] = 1.0
        present[char, position, word_types[ids[word]]] = 1.0
    return numpy.hstack([shares, present.reshape(len(text), len(POSITIONS) * n_types)])


def softword_positions(text: str) -> numpy.ndarray:
    """Per character, its position in jieba's segmentation as one-hot B/M/E/S (float32 (len(text), 4)),
    on rjieba where it gives jieba's words (spacy_cner/segmenter.py)."""
    out = numpy.zeros((len(text), len(POSITIONS)), dtype="float32")
    start = 0
    for word in jieba_words(text):
        end = start + len(word)
        if len(word) == 1:
            out[start, S] = 1.0
        elif word:
            out[start, B] = 1.0
            out[start + 1 : end - 1, M] = 1.0
            out[end - 1, E] = 1.0
        start = end
    if start != len(text):
        raise ValueError(f"jieba's words do not add up to the text ({start} of {len(text)} characters): {text[:50]!r}")
    return out
