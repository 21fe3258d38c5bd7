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

SoftLexicon.v2 with word_vectors adds eq. 10 itself: per set, 4/Z_v sum_{w in set} z(w) e(w) with
e(w) the frozen vector of the word's text in the pipeline's vectors (e.g. LAC's words, through
spacy-cner.lac_vectors.v1 with max_length > 2); a word without a vector adds nothing, to the sum
or to Z_v.
"""

import logging
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from thinc.api import Model, registry
from thinc.types import Floats2d

from ..lexicon import Lexicon, doc_text, token_means, token_spans
from ..pretrained.jieba_segmenter import jieba_words, load_jieba
from .lexicon_slot import LexiconSlot, required_lexicon

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
        (needs jieba, a requirement of spacy-cner).
    RETURNS (Model[List[Doc], List[Floats2d]]): Features (n_tokens, nO) per doc, nO set at
        initialize: 4 + 4 * n_types (+ 4 with softword).
    """
    return _soft_lexicon(softword)


def _soft_lexicon(softword: bool, word_vectors: bool = False, vector_width: Optional[int] = None) -> Model:
    attrs = {"lexicon": LexiconSlot(), "softword": softword, "last_batch": LastBatch()}
    if word_vectors:
        attrs.update(word_vectors=True, vector_width=vector_width, vector_rows=WordVectorRows())
    params = {"P": None} if vector_width is not None else {}
    return Model("soft_lexicon", forward, init=init, dims={"nO": None}, attrs=attrs, params=params)


@registry.layers("spacy-cner.SoftLexicon.v2")
def SoftLexicon_v2(
    softword: bool = False, word_vectors: bool = False, vector_width: Optional[int] = None
) -> Model[List[Doc], List[Floats2d]]:
    """SoftLexicon.v1, and with word_vectors the frequency-weighted mean vector of each B/M/E/S word
    set (Ma et al. 2020, eq. 10), read from the pipeline's vectors (frozen): 4 * their width more
    features per token, or 4 * vector_width with the vectors projected on their vector_width
    principal directions (fixed at initialize, saved as the layer's param "P", never trained): the
    mean of projected vectors is the projection of the mean, and the mixing layer's input, most of
    the cost, shrinks with it.

    softword (bool): As v1.
    word_vectors (bool): Add each set's mean word vector (the pipeline needs vectors of words:
        [initialize.before_init] spacy-cner.lac_vectors.v1 with max_length 4 or more, say).
    vector_width (Optional[int]): Project the word vectors to this many dimensions (None: as they are).
    RETURNS (Model[List[Doc], List[Floats2d]]): Features (n_tokens, nO) per doc.
    """
    if vector_width is not None and (not word_vectors or vector_width < 1):
        raise ValueError(f"SoftLexicon.v2: vector_width ({vector_width}) needs word_vectors = true and is >= 1.")
    return _soft_lexicon(softword, word_vectors, vector_width)


class WordVectorRows:
    """Per lexicon word, the row of its text in the pipeline's vectors (-1 for none), and the table as a
    float32 numpy array (projected, with vector_width): computed once per lexicon, table and projection
    (the objects themselves are kept and compared, so a new one at a freed one's address is not taken
    for it), on the CPU whatever the vectors' ops (cupy on a GPU). Not saved."""

    def __init__(self) -> None:
        self._rows: Optional[Tuple[Lexicon, object, Tuple, numpy.ndarray]] = None
        self._table: Optional[Tuple[object, Tuple, Optional[bytes], numpy.ndarray]] = None

    def rows(self, lexicon: Lexicon, vectors) -> numpy.ndarray:
        from spacy.strings import get_string_id

        from .ngram_vectors import _signature, _vector_index

        signature = _signature(vectors)
        entry = self._rows
        if entry is None or entry[0] is not lexicon or entry[1] is not vectors or entry[2] != signature:
            keys = numpy.fromiter((get_string_id(word) for word in lexicon.words), dtype="uint64", count=len(lexicon))
            self._rows = (lexicon, vectors, signature, _vector_index(vectors).find(keys))
        return self._rows[3]

    def table(self, vectors, projection=None) -> numpy.ndarray:
        """The vectors' rows as float32 numpy, times the projection (n_dims, k) when given."""
        from .ngram_vectors import _signature, float32_rows

        projection = None if projection is None else _to_numpy(projection).astype("float32")
        key = None if projection is None else projection.tobytes()
        entry = self._table
        if entry is None or entry[0] is not vectors or entry[1] != _signature(vectors) or entry[2] != key:
            data = float32_rows(_to_numpy(vectors.data))
            self._table = (vectors, _signature(vectors), key, data if projection is None else data @ projection)
        return self._table[3]

    def __getstate__(self) -> Dict:
        return {"_rows": None, "_table": None}


def _to_numpy(array) -> numpy.ndarray:
    """A numpy copy of a numpy or cupy array (spaCy moves the vectors to the GPU's ops)."""
    return numpy.asarray(array.get() if hasattr(array, "get") else array)


def principal_directions(vectors: numpy.ndarray, width: int) -> numpy.ndarray:
    """The top `width` right singular vectors of vectors (uncentered, so that a mean of projected rows is the
    projection of the mean), as a (n_dims, width) float32 matrix; columns past the rank are zeros."""
    if width > vectors.shape[1]:
        raise ValueError(f"SoftLexicon.v2: vector_width {width} is more than the vectors' width {vectors.shape[1]}.")
    _, _, vt = numpy.linalg.svd(numpy.asarray(vectors, dtype="float64"), full_matrices=False)
    out = numpy.zeros((vectors.shape[1], width), dtype="float32")
    out[:, : min(width, len(vt))] = vt[:width].T
    return out


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
    width = len(POSITIONS) * (1 + n_types) + (len(POSITIONS) if model.attrs["softword"] else 0)
    if model.attrs.get("word_vectors"):
        vectors = X[0].vocab.vectors if X else None
        if vectors is None or not vectors.shape[0] or vectors.mode == "floret":
            raise ValueError(
                "SoftLexicon.v2 has word_vectors = true but the pipeline has no (non-floret) vectors of words: set "
                "[initialize.before_init] spacy-cner.lac_vectors.v1 with max_length 4 or more (LAC's words), or "
                "[initialize] vectors to vectors of words."
            )
        rows = model.attrs["vector_rows"].rows(lexicon, vectors)
        if not (rows >= 0).any():
            raise ValueError(
                "SoftLexicon.v2 has word_vectors = true but no lexicon word has a vector in the pipeline's vectors."
            )
        logging.getLogger(__name__).info(
            "SoftLexicon: %d of %d lexicon words have a vector", int((rows >= 0).sum()), len(rows)
        )
        vector_width = model.attrs.get("vector_width")
        if vector_width is not None:
            used = model.attrs["vector_rows"].table(vectors)[numpy.unique(rows[rows >= 0])]
            model.set_param("P", principal_directions(used, vector_width))
        width += len(POSITIONS) * (vector_width or vectors.shape[1])
    model.set_dim("nO", width, force=True)


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    lexicon = required_lexicon(model)
    width = model.get_dim("nO")
    texts, spans = [doc_text(doc) for doc in docs], [token_spans(doc) for doc in docs]
    vectors = None
    if model.attrs.get("word_vectors") and docs:
        table = docs[0].vocab.vectors
        projection = model.get_param("P") if model.attrs.get("vector_width") is not None else None
        vectors = (model.attrs["vector_rows"].rows(lexicon, table), model.attrs["vector_rows"].table(table, projection))
    values = model.attrs["last_batch"].features(
        lexicon, texts, spans, lambda: batch_features(lexicon, texts, spans, model.attrs["softword"], vectors)
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
    pass reuses them (matching and jieba's segmentation are a share of a training step). Not saved.
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
    lexicon: Lexicon,
    texts: Sequence[str],
    spans: Sequence[numpy.ndarray],
    softword: bool,
    word_vectors: Optional[Tuple[numpy.ndarray, numpy.ndarray]] = None,
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
    flat = token_features(
        lexicon, joined, numpy.concatenate(shifted) if shifted else numpy.zeros((0, 2), "int64"), softword, word_vectors
    )
    bounds = numpy.cumsum([0] + [len(doc_spans) for doc_spans in shifted])
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(texts))]


def token_features(
    lexicon: Lexicon,
    text: str,
    spans: Sequence[Tuple[int, int]],
    softword: bool,
    word_vectors: Optional[Tuple[numpy.ndarray, numpy.ndarray]] = None,
) -> numpy.ndarray:
    """The features of each (start, end) character span of text (a token): the mean over its
    characters; an empty span (whitespace) gets zeros.

    word_vectors (Optional[Tuple[numpy.ndarray, numpy.ndarray]]): Per lexicon word its vector's row
        (-1: none), and the vectors: adds char_word_vectors.
    RETURNS (numpy.ndarray): float32 (len(spans), 4 + 4 * n_types (+ 4 with softword) (+ 4 * width)).
    """
    per_char = char_features(lexicon, text)
    if softword:
        per_char = numpy.hstack([per_char, softword_positions(text)])
    if word_vectors is not None:
        per_char = numpy.hstack([per_char, char_word_vectors(lexicon, text, *word_vectors)])
    return token_means(per_char, spans)


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
        ids = matches[:, 2]
        word, char, position, weights = _covered_characters(lexicon, matches)
        numpy.add.at(shares, (char, position), weights[word])
        total = shares.sum(axis=1, keepdims=True)
        numpy.divide(shares * len(POSITIONS), total, out=shares, where=total > 0)
        present[char, position, 0] = 1.0
        present[char, position, word_types[ids[word]]] = 1.0
    return numpy.hstack([shares, present.reshape(len(text), len(POSITIONS) * n_types)])


def _covered_characters(
    lexicon: Lexicon, matches: numpy.ndarray
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """One row per (matched word, character it covers): the match's index, the character, its position in
    the word (B/M/E/S), and per match its weight z(w) = 1 + log(1 + frequency(w)) (1 without frequencies)."""
    starts, ends, ids = matches.T
    lengths = ends - starts
    word = numpy.repeat(numpy.arange(len(matches)), lengths)
    offset = numpy.arange(len(word)) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    char = starts[word] + offset
    length = lengths[word]
    position = numpy.where(length == 1, S, numpy.where(offset == 0, B, numpy.where(offset == length - 1, E, M)))
    if lexicon.frequencies is None:
        weights = numpy.ones(len(matches), dtype="float32")
    else:
        weights = 1.0 + numpy.log1p(numpy.maximum(lexicon.frequencies[ids], 0)).astype("float32")
    return word, char, position, weights


def char_word_vectors(lexicon: Lexicon, text: str, rows: numpy.ndarray, vectors: numpy.ndarray) -> numpy.ndarray:
    """Per character, the weighted mean vector of its B, M, E and S word sets (Ma et al. 2020, eq. 10):
    v(set) = 4/Z sum_{w in set} z(w) e(w), z(w) = 1 + log(1 + frequency(w)), Z summed over the words of
    all four sets that have a vector (rows >= 0); words without one add nothing.

    RETURNS (numpy.ndarray): float32 (len(text), 4 * width), the B, M, E, S means side by side.
    """
    from scipy.sparse import csr_matrix

    width = vectors.shape[1]
    matches = numpy.asarray(lexicon.find(text), dtype="int64").reshape(-1, 3)
    if len(matches):
        matches = matches[rows[matches[:, 2]] >= 0]
    if not len(matches):
        return numpy.zeros((len(text), len(POSITIONS) * width), dtype="float32")
    ids = matches[:, 2]
    word, char, position, weights = _covered_characters(lexicon, matches)
    z = weights[word]
    total = numpy.bincount(char, weights=z, minlength=len(text))  # Z per character, over its four sets
    scale = (len(POSITIONS) * z / total[char]).astype("float32")
    # A sparse (character x position, vector row) matrix of the weights, times the vectors: the sums
    # without a (pairs, width) temporary.
    mix = csr_matrix(
        (scale, (char * len(POSITIONS) + position, rows[ids[word]])), shape=(len(text) * len(POSITIONS), len(vectors))
    )
    out = numpy.asarray(mix @ numpy.asarray(vectors, dtype="float32"), dtype="float32")
    return out.reshape(len(text), len(POSITIONS) * width)


def softword_positions(text: str) -> numpy.ndarray:
    """Per character, its position in jieba's segmentation as one-hot B/M/E/S (float32 (len(text), 4)),
    on rjieba where it gives jieba's words (spacy_cner/pretrained/jieba_segmenter.py)."""
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
