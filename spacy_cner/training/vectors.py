"""Character and bigram vectors trained on a corpus's own text, for `static_vectors = true`.

Pretrained vectors (Lattice-LSTM's gigaword files) cannot be downloaded everywhere; the train split
itself, and any unlabeled text of the same domain, can be read instead. gensim's word2vec (skip-gram,
as the gigaword_chn.all.a2b.{uni,bi}.ite50.vec files Lattice-LSTM and TENER use were trained) learns
character vectors on the texts as characters and bigram vectors on them as overlapping bigrams,
keyed as CharBigramEmbed's `ngram_vectors` looks them up (a character; a bigram as its two
characters). They are written as a spaCy pipeline with vectors only, for `--paths.vectors`, as
`spacy init vectors` would write them. gensim is written in C, a skip-gram of our own in torch would
be slower by far; it is a requirement (the default config trains vectors at initialize).
"""

import time
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy
import spacy
import srsly
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.util import registry
from spacy.vectors import Vectors
from spacy.vocab import Vocab
from wasabi import msg

from ..corpus.problems import iter_lines


@dataclass
class VectorSettings:
    """word2vec's settings: width, context window, epochs, the fewest occurrences a key needs, seed,
    and worker threads (1 gives the same vectors for the same seed; more are faster, not repeatable)."""

    width: int = 50
    window: int = 5
    epochs: int = 10
    min_count: int = 2
    seed: int = 0
    workers: int = 1

    def __post_init__(self) -> None:
        for name in ("width", "window", "epochs", "min_count", "workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"VectorSettings.{name} must be a positive integer, got {value!r}.")


@dataclass
class VectorsSummary:
    """What `train_vectors` read and wrote (saved as summary.json beside the vectors)."""

    sources: List[str] = field(default_factory=list)
    texts: int = 0
    characters: int = 0
    char_vectors: int = 0
    bigram_vectors: int = 0
    settings: Dict[str, int] = field(default_factory=dict)


def read_texts(path: Union[str, Path]) -> Iterator[str]:
    """The texts of a file: the docs of a .spacy DocBin, or the lines of any other file (a plain-text
    file holds one text per line; empty lines are skipped). NER files are read through
    `python -m spacy_cner convert` first, so that their tags are not read as text.

    path (Union[str, Path]): A .spacy file, or a UTF-8 text file.
    YIELDS (str): One text per doc or non-empty line.
    """
    path = Path(path)
    if path.suffix == ".spacy":
        for doc in DocBin().from_disk(path).get_docs(Vocab()):
            yield doc.text
        return
    with path.open("rb") as file:
        for number, line in enumerate(iter_lines(file), 1):
            try:
                text = line.decode("utf8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}, line {number}: not UTF-8 ({err.reason} at byte {err.start}).") from err
            if text.strip():
                yield text


def stable_hash(text: str) -> int:
    """A hash of a word that is the same in every run, as Python's own is not (gensim seeds each word's
    first vector with it)."""
    return zlib.crc32(text.encode("utf8"))


def train_char_bigram_vectors(
    texts: Sequence[str],
    settings: Optional[VectorSettings] = None,
    fixed: Optional[Mapping[str, numpy.ndarray]] = None,
    progress: bool = False,
) -> Tuple[List[str], numpy.ndarray, Dict[str, int]]:
    """Skip-gram vectors of the characters and of the bigrams of texts.

    texts (Sequence[str]): The texts, read twice (as characters, then as bigrams).
    settings (Optional[VectorSettings]): word2vec's settings (defaults when None).
    fixed (Optional[Mapping[str, numpy.ndarray]]): Vectors (of settings.width) that keys of the texts
        keep: they start there and are locked (gensim's vectors_lockf 0), so that the other keys are
        learnt in their space (pretrained vectors completed for a corpus's own characters).
    progress (bool): Show a progress bar over the epochs of both trainings (MSRA's take minutes).
    RETURNS (Tuple[List[str], numpy.ndarray, Dict[str, int]]): The keys (characters, then bigrams),
        their vectors (n_keys, width) float32, and how many of each kind.
    """
    try:
        from gensim.models import Word2Vec  # noqa: F401  (here for the error; used in _word2vec)
    except ImportError as err:
        raise ImportError(
            'Training vectors needs gensim (a requirement of spacy-cner): pip install "gensim>=4.3"'
        ) from err
    settings = settings or VectorSettings()
    if not any(texts):
        raise ValueError("No text to train vectors on: the inputs are empty.")
    gensim_settings = dict(
        vector_size=settings.width,
        window=settings.window,
        sg=1,
        min_count=settings.min_count,
        epochs=settings.epochs,
        seed=settings.seed,
        workers=settings.workers,
        hashfxn=stable_hash,
    )
    kinds = {
        "char_vectors": [list(text) for text in texts],
        "bigram_vectors": [[a + b for a, b in zip(text, text[1:])] for text in texts if len(text) > 1],
    }
    keys: List[str] = []
    rows = []
    counts = {}
    bar = _EpochBar(settings.epochs * sum(1 for s in kinds.values() if any(s))) if progress else None
    for kind, sentences in kinds.items():
        if not any(sentences):
            counts[kind] = 0
            continue
        if bar is not None:
            bar.bar.set_description(f"word2vec, {kind.replace('_', ' ')}")
        try:
            wv = _word2vec(sentences, {**gensim_settings, "callbacks": [bar] if bar else []}, fixed)
        except RuntimeError as err:  # gensim: "you must first build vocabulary before training the model"
            raise ValueError(
                f"No {kind.split('_')[0]} occurs {settings.min_count} times in the texts: lower min_count."
            ) from err
        keys.extend(wv.index_to_key)
        rows.append(numpy.asarray(wv.vectors, dtype="float32"))
        counts[kind] = len(wv.index_to_key)
    if bar is not None:
        bar.bar.close()
    return keys, numpy.vstack(rows), counts


class _EpochBar:
    """A tqdm bar that gensim's Word2Vec moves at each epoch's end (as a CallbackAny2Vec)."""

    def __init__(self, total: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="epoch", desc="word2vec")

    def on_epoch_end(self, model) -> None:
        self.bar.update(1)

    def __getattr__(self, name: str):
        # gensim also calls on_train_begin, on_epoch_begin, on_train_end: nothing to do there.
        if name.startswith("on_"):
            return lambda model: None
        raise AttributeError(name)


def _word2vec(sentences: List[List[str]], gensim_settings: Dict, fixed: Optional[Mapping[str, numpy.ndarray]]):
    """The trained KeyedVectors of sentences; keys in fixed start at and keep their vectors."""
    from gensim.models import Word2Vec

    if not fixed:
        return Word2Vec(sentences, **gensim_settings).wv
    model = Word2Vec(**gensim_settings)
    model.build_vocab(sentences)
    wv = model.wv
    lockf = numpy.ones(len(wv.index_to_key), dtype="float32")
    for index, key in enumerate(wv.index_to_key):
        vector = fixed.get(key)
        if vector is not None:
            if vector.shape != (wv.vector_size,):
                raise ValueError(f"The fixed vector of {key!r} has shape {vector.shape}, expected ({wv.vector_size},).")
            wv.vectors[index] = vector
            lockf[index] = 0.0
    wv.vectors_lockf = lockf
    model.train(
        sentences,
        total_examples=model.corpus_count,
        epochs=model.epochs,
        callbacks=gensim_settings.get("callbacks", ()),
    )
    return wv


def vectors_pipeline(keys: Sequence[str], vectors: numpy.ndarray, lang: str = "zh") -> spacy.language.Language:
    """A blank pipeline whose vocab holds the vectors, as `spacy init vectors` makes one.

    keys (Sequence[str]): One key per row.
    vectors (numpy.ndarray): (len(keys), width) float32.
    lang (str): The blank pipeline's language.
    RETURNS (Language): Saved with `to_disk`, it is what `[initialize] vectors` loads.
    """
    if len(keys) != vectors.shape[0]:
        raise ValueError(f"{len(keys)} keys for {vectors.shape[0]} vectors.")
    nlp = spacy.blank(lang)
    strings = nlp.vocab.strings
    nlp.vocab.vectors = Vectors(
        strings=strings, data=vectors, keys=[strings.add(key) for key in keys], name=f"{lang}_self_trained.vectors"
    )
    return nlp


@registry.callbacks("spacy-cner.self_trained_vectors.v1")
def make_self_trained_vectors(
    corpus: Optional[Union[str, Path]],
    pretrained: Optional[Union[str, Path]] = None,
    width: int = 50,
    window: int = 5,
    epochs: int = 10,
    min_count: int = 2,
    seed: Optional[int] = 0,
) -> Callable[[Language], Language]:
    """[initialize.before_init]: train character and bigram vectors on the train corpus's own text
    and give them to the pipeline's vocab, before its components initialize (one step: no
    `train-vectors` run, no --paths.vectors). With pretrained set (--paths.vectors), it trains
    nothing and [initialize] vectors loads those; the vectors are saved with the pipeline either way.

    corpus (Optional[Union[str, Path]]): The train corpus (${paths.train}): a .spacy file, or a folder
        of them. Never a dev or test split.
    pretrained (Optional[Union[str, Path]]): ${paths.vectors}: when set, nothing is trained.
    width, window, epochs, min_count: word2vec's settings (VectorSettings).
    seed (Optional[int]): word2vec's seed (${system.seed}; null: 0).
    RETURNS (Callable[[Language], Language]): The callback.
    """
    settings = VectorSettings(
        width=width, window=window, epochs=epochs, min_count=min_count, seed=0 if seed is None else seed, workers=1
    )

    def before_init(nlp: Language) -> Language:
        if pretrained is not None:
            msg.info(f"Vectors: {pretrained} ([initialize] vectors), none trained")
            return nlp
        start = time.perf_counter()
        texts = train_corpus_texts(
            corpus, "spacy-cner.self_trained_vectors.v1", "set --paths.train, or give vectors with --paths.vectors"
        )
        keys, vectors, counts = train_on_the_train_corpus(texts, settings)
        strings = nlp.vocab.strings
        nlp.vocab.vectors = Vectors(
            strings=strings,
            data=vectors,
            keys=[strings.add(key) for key in keys],
            name=f"{nlp.lang}_self_trained.vectors",
        )
        msg.info(
            f"Vectors trained on the train corpus's {len(texts):,} texts: {counts['char_vectors']:,} characters, "
            f"{counts['bigram_vectors']:,} bigrams, width {width} ({time.perf_counter() - start:.0f} s)"
        )
        return nlp

    return before_init


def train_corpus_texts(corpus: Optional[Union[str, Path]], name: str, hint: str) -> List[str]:
    """The texts of the train corpus an initialize callback trains vectors on (a .spacy file or a folder of
    them), or an error naming the callback and what to set."""
    if corpus is None:
        raise ValueError(f"{name} trains vectors on the train corpus, but its corpus (paths.train) is null: {hint}.")
    files = sorted(Path(corpus).rglob("*.spacy")) if Path(corpus).is_dir() else [Path(corpus)]
    if not files or not all(path.exists() for path in files):
        raise ValueError(f"{name}: no .spacy train corpus at {corpus}.")
    return [text for path in files for text in read_texts(path)]


def train_on_the_train_corpus(
    texts: Sequence[str], settings: VectorSettings, fixed: Optional[Mapping[str, numpy.ndarray]] = None
) -> Tuple[List[str], numpy.ndarray, Dict[str, int]]:
    """train_char_bigram_vectors with a progress bar, and with min_count 1 on a corpus too small for
    settings.min_count (a toy set, a first round of labels: a config must still train), said in a warning."""
    try:
        return train_char_bigram_vectors(texts, settings, fixed, progress=True)
    except ValueError as err:
        if settings.min_count == 1 or not any(texts):
            raise
        msg.warn(
            f"{err} The train corpus is too small for min_count {settings.min_count}: "
            "training the vectors with min_count 1."
        )
        return train_char_bigram_vectors(texts, replace(settings, min_count=1), fixed, progress=True)


def train_vectors(
    inputs: Iterable[Union[str, Path]],
    output: Union[str, Path],
    settings: Optional[VectorSettings] = None,
    progress: bool = False,
) -> VectorsSummary:
    """Train character and bigram vectors on the texts of inputs and save them as a pipeline in output.

    inputs (Iterable[Union[str, Path]]): .spacy files (a train split) and plain-text files (one text
        per line: unlabeled text of the domain). Never a dev or test split that will be scored.
    output (Union[str, Path]): The folder for the pipeline (`--paths.vectors OUTPUT`) and summary.json.
    settings (Optional[VectorSettings]): word2vec's settings.
    progress (bool): Show a progress bar over word2vec's epochs.
    RETURNS (VectorsSummary): What was read and written.
    """
    settings = settings or VectorSettings()
    sources = [Path(path) for path in inputs]
    if not sources:
        raise ValueError("No input to train vectors on: pass a .spacy train split or a text file.")
    texts = [text for path in sources for text in read_texts(path)]
    keys, vectors, counts = train_char_bigram_vectors(texts, settings, progress=progress)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    vectors_pipeline(keys, vectors).to_disk(output)
    summary = VectorsSummary(
        sources=[str(path) for path in sources],
        texts=len(texts),
        characters=sum(len(text) for text in texts),
        settings=asdict(settings),
        **counts,
    )
    srsly.write_json(output / "summary.json", asdict(summary))
    return summary
