"""Character and bigram vectors from LAC's pretrained embeddings, for CharBigramEmbed's static_vectors.

LAC's tagger embeds single characters and words (28k of them two characters long) in 128
dimensions learnt on Baidu's news and web text; keyed by their text, they are what
CharBigramEmbed's vectors look up for a character and for a bigram. Keys LAC lacks (characters and
bigrams of the user's corpus) are either zeros ("none"), learnt on the train corpus in LAC's space
("trained": word2vec with LAC's vectors fixed) or covered by self-trained vectors concatenated beside
LAC's ("concat").
"""

import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.strings import StringStore
from spacy.util import registry
from spacy.vectors import Vectors
from thinc.api import Model
from wasabi import msg

from ..layers.soft_lexicon import principal_directions
from ..pretrained.fetch import download_progress
from ..pretrained.lac import LAC_CREDIT, LacFiles, char_bigram_vectors, open_lac
from .vectors import VectorSettings, train_corpus_texts, train_on_the_train_corpus

MISSING = ("none", "trained", "concat")
DTYPES = ("float32", "float16", "int8")


def lac_table(lac: LacFiles, max_length: int = 2) -> Tuple[List[str], numpy.ndarray, numpy.ndarray]:
    """LAC's keys up to max_length characters (q2b.dic's forms as aliases), the row of each and the rows.

    RETURNS (Tuple[List[str], numpy.ndarray, numpy.ndarray]): keys, key -> row (int64), rows (float32).
    """
    vocabulary, embeddings = lac.word_embeddings()
    keys, ids, _ = char_bigram_vectors(vocabulary, embeddings, lac.replacements(), max_length)
    unique, rows = numpy.unique(ids, return_inverse=True)
    return keys, rows.astype("int64"), numpy.ascontiguousarray(embeddings[unique], dtype="float32")


def shared_vectors(
    strings: StringStore, keys: Sequence[str], rows: numpy.ndarray, data: numpy.ndarray, name: str
) -> Vectors:
    """A Vectors table where several keys may share a row (an alias and its target)."""
    if len(keys) != len(rows):
        raise ValueError(f"{len(keys)} keys for {len(rows)} rows.")
    vectors = Vectors(strings=strings, data=data, name=name)
    for key, row in zip(keys, rows):
        vectors.add(strings.add(key), row=int(row))
    return vectors


def combine(
    lac_keys: Sequence[str],
    lac_rows: numpy.ndarray,
    lac_data: numpy.ndarray,
    texts: Sequence[str],
    missing: str,
    settings: VectorSettings,
) -> Tuple[List[str], numpy.ndarray, numpy.ndarray, Dict[str, int]]:
    """LAC's table completed for the corpus's keys as `missing` says (see the module docstring).

    RETURNS (Tuple[List[str], numpy.ndarray, numpy.ndarray, Dict[str, int]]): keys, their rows, the rows'
        data, and counts (LAC's keys, the keys added, the width).
    """
    if missing not in MISSING:
        raise ValueError(f"missing must be one of {MISSING}, got {missing!r}.")
    counts = {"lac_keys": len(lac_keys), "added_keys": 0}
    if missing == "none":
        counts["width"] = lac_data.shape[1]
        return list(lac_keys), lac_rows, lac_data, counts
    index = {key: int(row) for key, row in zip(lac_keys, lac_rows)}
    if missing == "trained":
        fixed = {key: lac_data[row] for key, row in index.items()}
        own_keys, own, _ = train_on_the_train_corpus(texts, _with_width(settings, lac_data.shape[1]), fixed=fixed)
        new = [(key, vector) for key, vector in zip(own_keys, own) if key not in index]
        keys = list(lac_keys) + [key for key, _ in new]
        rows = numpy.concatenate([lac_rows, len(lac_data) + numpy.arange(len(new), dtype="int64")])
        data = numpy.vstack([lac_data] + [vector[None] for _, vector in new]) if new else lac_data
        counts.update(added_keys=len(new), width=data.shape[1])
        return keys, rows, numpy.ascontiguousarray(data, dtype="float32"), counts
    # concat: [LAC's vector or zeros | the self-trained vector or zeros], one row per distinct pair.
    own_keys, own, _ = train_on_the_train_corpus(texts, settings)
    own_index = {key: i for i, key in enumerate(own_keys)}
    keys = list(lac_keys) + [key for key in own_keys if key not in index]
    pairs: Dict[Tuple[int, int], int] = {}
    rows = numpy.empty(len(keys), dtype="int64")
    for i, key in enumerate(keys):
        pair = (index.get(key, -1), own_index.get(key, -1))
        rows[i] = pairs.setdefault(pair, len(pairs))
    data = numpy.zeros((len(pairs), lac_data.shape[1] + own.shape[1]), dtype="float32")
    for (lac_row, own_row), row in pairs.items():
        if lac_row >= 0:
            data[row, : lac_data.shape[1]] = lac_data[lac_row]
        if own_row >= 0:
            data[row, lac_data.shape[1] :] = own[own_row]
    counts.update(added_keys=len(keys) - len(lac_keys), width=data.shape[1])
    return keys, rows, data, counts


def _with_width(settings: VectorSettings, width: int) -> VectorSettings:
    from dataclasses import replace

    return replace(settings, width=width)


@registry.callbacks("spacy-cner.lac_vectors.v1")
def make_lac_vectors(
    corpus: Optional[Union[str, Path]] = None,
    missing: str = "trained",
    sdist: Optional[Union[str, Path]] = None,
    width: int = 50,
    window: int = 5,
    epochs: int = 10,
    min_count: int = 2,
    seed: Optional[int] = 0,
    max_length: int = 2,
    dtype: str = "float32",
    projected_width: Optional[int] = None,
) -> Callable[[Language], Language]:
    """[initialize.before_init]: give the pipeline's vocab LAC's character and bigram vectors (fetched
    through pip's package index the first time, hash-checked, cached), completed for the train
    corpus's keys as `missing` says; saved with the pipeline. The pipeline's meta credits LAC. When
    [initialize] vectors is set (--paths.vectors), those vectors are the pipeline's and nothing of LAC is
    fetched or read (as spacy-cner.self_trained_vectors.v1 trains nothing then): said in the log.

    corpus (Optional[Union[str, Path]]): The train corpus (${paths.train}), .spacy file or folder;
        needed unless missing is "none".
    missing (str): "none" (LAC's keys only), "trained" (the corpus's other characters and bigrams
        learnt by word2vec with LAC's vectors fixed, 128 wide) or "concat" (self-trained vectors of
        `width` beside LAC's, zeros where either lacks a key).
    sdist (Optional[Union[str, Path]]): A local copy of LAC-2.1.2.tar.gz (machines without a registry).
    width, window, epochs, min_count, seed: word2vec's settings (VectorSettings; width only for concat).
    max_length (int): LAC's words up to this many characters (2: characters and bigrams, what
        CharBigramEmbed reads; more for SoftLexicon.v2's word vectors).
    dtype (str): "float32", or "float16" to store the (frozen) vectors in half the space, or "int8" in
        a quarter: each column scaled into [-1, 1] (by its largest magnitude) and rounded to steps of
        1/127 (int8_columns). All are read into float32; int8 tables only by CharBigramEmbed's vectors
        and SoftLexicon's word vectors, which scale them back (spaCy's StaticVectors would not: refused).
    projected_width (Optional[int]): Keep only the vectors' coordinates on their projected_width principal
        directions (uncentered, as SoftLexicon.v2's vector_width; fitted on the rows at initialize): a
        smaller table and input layer, e.g. for a distilled student; None: the vectors as they are.
    RETURNS (Callable[[Language], Language]): The callback.
    """
    if missing not in MISSING:
        raise ValueError(f"spacy-cner.lac_vectors.v1: missing must be one of {MISSING}, got {missing!r}.")
    if dtype not in DTYPES or max_length < 1:
        raise ValueError(
            f"spacy-cner.lac_vectors.v1: dtype one of {DTYPES} and max_length >= 1, got {dtype!r}, {max_length}."
        )
    if projected_width is not None and projected_width < 1:
        raise ValueError(f"spacy-cner.lac_vectors.v1: projected_width must be null or >= 1, got {projected_width}.")
    settings = VectorSettings(
        width=width, window=window, epochs=epochs, min_count=min_count, seed=0 if seed is None else seed, workers=1
    )

    def before_init(nlp: Language) -> Language:
        start = time.perf_counter()
        other = _initialize_vectors(nlp)
        if other:  # the user's own vectors (--paths.vectors), which spaCy loads after this callback
            msg.info(f"Vectors: {other} ([initialize] vectors), not LAC's (nothing fetched)")
            return nlp
        texts: List[str] = []
        if missing != "none":
            texts = train_corpus_texts(
                corpus,
                "spacy-cner.lac_vectors.v1",
                f'missing = {missing!r} learns its keys: set --paths.train, or missing = "none"',
            )
        if dtype == "int8":
            refuse_unscaled_int8_readers(nlp)
        lac = open_lac(sdist, progress=download_progress())
        keys, rows, data, counts = combine(*lac_table(lac, max_length), texts, missing, settings)
        if projected_width is not None:
            if projected_width > data.shape[1]:
                raise ValueError(
                    f"spacy-cner.lac_vectors.v1: projected_width {projected_width} is more than the vectors' "
                    f"width {data.shape[1]}: lower it or set it to null."
                )
            data = (data @ principal_directions(data, projected_width)).astype("float32")
            counts["width"] = projected_width
        data = int8_columns(data) if dtype == "int8" else data.astype(dtype)
        nlp.vocab.vectors = shared_vectors(nlp.vocab.strings, keys, rows, data, f"{nlp.lang}_lac_{missing}.vectors")
        credit(nlp)
        msg.info(
            f"Vectors: LAC's {counts['lac_keys']:,} characters and words, {counts['added_keys']:,} keys of the train "
            f"corpus added ({missing}), width {counts['width']}{' (projected)' if projected_width else ''} "
            f"({time.perf_counter() - start:.0f} s)"
        )
        return nlp

    return before_init


def int8_columns(data: numpy.ndarray) -> numpy.ndarray:
    """The table in int8: each column divided by its largest magnitude and rounded to steps of 1/127,
    which the readers (ngram_vectors.float32_rows) multiply back by 1/127. Per column, because a projected
    table's first principal directions are much wider than its last. The scales are not kept: the frozen
    vectors feed a trained linear layer, which learns on the scaled columns as they are stored."""
    scale = numpy.abs(data).max(axis=0).astype("float64")
    scale[scale == 0] = 1.0
    return numpy.rint(data / scale * 127).astype("int8")


def refuse_unscaled_int8_readers(nlp: Language) -> None:
    """dtype "int8" with a component whose model reads the vectors with spaCy's StaticVectors, which
    would read the int8 values as they are (up to 127 instead of 1): refused, saying what to do."""
    for name, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if isinstance(model, Model) and any(node.name == "static_vectors" for node in model.walk()):
            raise ValueError(
                f"spacy-cner.lac_vectors.v1: dtype 'int8' is read by spacy-cner.CharBigramEmbed's and "
                f"SoftLexicon's vectors only, but the model of '{name}' reads them with spaCy's StaticVectors, "
                'which would not scale them back: set dtype = "float16".'
            )


def _initialize_vectors(nlp: Language) -> Optional[str]:
    """[initialize] vectors of nlp's config, its variables filled in (${paths.vectors})."""
    try:
        config = nlp.config.interpolate()
    except Exception:  # a config without the sections it refers to: read it as it is
        config = nlp.config
    return config.get("initialize", {}).get("vectors")


def credit(nlp: Language) -> None:
    """Name LAC among the pipeline's sources (meta.json, the packaged model card)."""
    sources = [source for source in nlp.meta.get("sources") or [] if source.get("name") != LAC_CREDIT["name"]]
    nlp.meta["sources"] = sources + [dict(LAC_CREDIT)]
