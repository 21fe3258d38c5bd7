"""A ready Chinese pipeline from Baidu's LAC (Apache-2.0), no training: a `lac_tagger` component running LAC's tagger
over a character tokenizer.

The component writes all LAC gives: tokens (LAC's words, merged from the characters with spaCy's retokenizer as
`merge_entities` does, or the characters themselves), `token.tag_` (LAC's POS: its 24 classes, the entity words with
the POS whose ids they share: PER nr, LOC ns, ORG nt, TIME t) and `doc.ents` (each word LAC tags PER, LOC, ORG or
TIME). The words are read as lac_analyzer.read_words does: LAC's, but for text LAC leaves untagged (`x`, `w`),
whitespace (`_SP`) and emoji (`w`), which never join another word. A component, not a tokenizer as in spacy-stanza:
spaCy tokenizes one text at a time, and LAC's network is faster over a batch of texts; each sentence is read alone
(a longer one in windows), so a text gets the same analysis alone and in a batch. Its weights and dictionaries are
saved in the component's folder, so `spacy.load` needs neither the sdist nor paddle. `LacTokenizer` (the whole
analyser in the tokenizer, one text at a time and read whole) stays for the pipelines written with it.
"""

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy
import spacy
import srsly
import torch
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.attrs import ENT_IOB, ENT_TYPE, IDX, LENGTH, TAG
from spacy.tokens import Doc, Span
from spacy.util import DummyTokenizer, ensure_path, minibatch, registry
from spacy.vocab import Vocab

from .. import extensions  # noqa: F401  (registers ent._.score)
from ..tokenizer import _check_encodable, words_and_spaces
from .lac import LAC_CREDIT, LacFiles
from ..about import __version__
from ..backends.threads import TorchThreadsSetting, check_threads, torch_threads
from ..corpus.labels import explain_labels
from .lac_analyzer import (
    ENTITY_POS,
    OTHER_TAG,
    SPACE_TAG,
    SYMBOL_TAG,
    DictionarySegmenter,
    LacTagger,
    Lexicon,
    read_words,
    tagger_from_sdist,
)
from .lac_net import LacNetwork

LAC_TOKENIZER = "spacy-cner.LacTokenizer.v1"
LAC_COMPONENT = "lac_tagger"
TOKENS = ("words", "chars")
PIPELINE_CREDIT = {**LAC_CREDIT, "files": "LAC/lac_model/model/* (the tagger's weights), LAC/lac_model/conf/*"}
DESCRIPTION = (
    "Chinese words, POS tags and PER/LOC/ORG/TIME entities from Baidu's LAC 2.1.2 (Lexical Analysis of "
    "Chinese, Apache-2.0, https://github.com/baidu/lac): its BiGRU-CRF tagger and dictionary segmenter "
    "rebuilt in torch from the weights of its PyPI sdist, untrained here."
)
FILES = ("cfg", "lexicon", "segment_dictionary", "weights")
# What LAC's entity labels mean (its README's table).
LABEL_MEANINGS = {
    "PER": "Person name (人名, LAC)",
    "LOC": "Place name (地名, LAC)",
    "ORG": "Organisation name (机构名, LAC)",
    "TIME": "Time or date expression (时间, LAC)",
}
# What each token.tag_ means: LAC's README's table, the POS its entity ids share, and the tags read_words adds.
TAG_MEANINGS = {
    "n": "common noun (普通名词, LAC)",
    "f": "localiser noun (方位名词, LAC)",
    "s": "place noun (处所名词, LAC)",
    "nw": "title of a work (作品名, LAC)",
    "nz": "other proper noun (其他专名, LAC)",
    "v": "verb (普通动词, LAC)",
    "vd": "verb used as an adverb (动副词, LAC)",
    "vn": "verb used as a noun (名动词, LAC)",
    "a": "adjective (形容词, LAC)",
    "ad": "adjective used as an adverb (副形词, LAC)",
    "an": "adjective used as a noun (名形词, LAC)",
    "d": "adverb (副词, LAC)",
    "m": "numeral or quantity (数量词, LAC)",
    "q": "measure word (量词, LAC)",
    "r": "pronoun (代词, LAC)",
    "p": "preposition (介词, LAC)",
    "c": "conjunction (连词, LAC)",
    "u": "particle (助词, LAC)",
    "xc": "other function word (其他虚词, LAC)",
    SYMBOL_TAG: "punctuation or symbol (标点符号, LAC; emoji too)",
    "nr": "person name (人名: LAC's PER entities)",
    "ns": "place name (地名: LAC's LOC entities)",
    "nt": "organisation name (机构名: LAC's ORG entities)",
    "t": "time (时间: LAC's TIME entities)",
    OTHER_TAG: "text LAC leaves untagged (its O)",
    SPACE_TAG: "whitespace",
}


@Language.factory(
    LAC_COMPONENT, default_config={"tokens": "words", "window_size": 256, "scores": True, "torch_threads": 1}
)
def make_lac_tagger(
    nlp: Language, name: str, tokens: str, window_size: int, scores: bool, torch_threads: Optional[int]
) -> "LacTaggerComponent":
    """LAC's tagger as a component (weights from its folder, or build_pipeline).

    tokens (str): "words" (merge each LAC word's tokens into one) or "chars" (keep the tokenizer's tokens).
    window_size (int): The most characters LAC reads at once: each sentence alone, a longer one in overlapping
        windows of this many characters.
    scores (bool): Set each entity's `ent._.score`, its probability under LAC's CRF (lac_probabilities.py).
    torch_threads (Optional[int]): torch's threads while LAC's network runs (set around each batch, the caller's
        put back after): 1 by default (backends/threads.py says why); None: the process's setting.
    """
    return LacTaggerComponent(
        nlp.vocab, name, tokens=tokens, window_size=window_size, scores=scores, torch_threads=torch_threads
    )


class LacTaggerComponent(Pipe):
    """Words, tags and entities from LAC's tagger (lac_analyzer.LacTagger), batched over docs.

    vocab (Vocab): The pipeline's vocab.
    name (str): The component's name.
    tokens (str): "words" or "chars".
    window_size (int): See make_lac_tagger.
    tagger (Optional[LacTagger]): The analyser; None until from_disk / from_bytes (or set by build_pipeline).
    scores (bool), torch_threads (Optional[int]): See make_lac_tagger.
    """

    def __init__(
        self,
        vocab: Vocab,
        name: str = LAC_COMPONENT,
        tokens: str = "words",
        window_size: int = 256,
        tagger: Optional[LacTagger] = None,
        scores: bool = True,
        torch_threads: Optional[int] = 1,
    ):
        if tokens not in TOKENS:
            raise ValueError(f"{name}: tokens must be one of {TOKENS}, got {tokens!r}.")
        if window_size < 2:
            raise ValueError(f"{name}: window_size must be >= 2 characters, got {window_size}.")
        self.vocab = vocab
        self.name = name
        self.cfg = {
            "tokens": tokens,
            "window_size": window_size,
            "scores": scores,
            "torch_threads": check_threads(torch_threads, name),
        }
        self.tagger = tagger
        explain_labels({**LABEL_MEANINGS, **TAG_MEANINGS})

    # torch's threads while LAC's network runs (None: the process's; see make_lac_tagger).
    torch_threads = TorchThreadsSetting()

    @property
    def labels(self) -> Tuple[str, ...]:
        """The entity labels (LAC's four), as spaCy's meta and model card list a component's labels."""
        return tuple(LABEL_MEANINGS)

    def __call__(self, doc: Doc) -> Doc:
        return next(self.pipe([doc]))

    def pipe(self, docs: Iterable[Doc], batch_size: int = 64) -> Iterator[Doc]:
        """The docs, analysed batch_size at a time (the sentences of a batch run together)."""
        if self.tagger is None:
            raise ValueError(
                f"{self.name} has no weights: load a pipeline written by `python -m spacy_cner pretrained "
                "pipeline`, or build one with spacy_cner.pretrained.lac_pipeline.build_pipeline."
            )
        scores = self.cfg["scores"]
        for batch in minibatch(docs, size=batch_size):
            with torch_threads(self.torch_threads):  # per batch: the caller's threads between the yields
                analysis = self.tagger.windowed_analysis([doc.text for doc in batch], self.cfg["window_size"], scores)
                merge = self.cfg["tokens"] == "words"
                batch = [annotate(doc, words, tags, merge=merge) for doc, (words, tags) in zip(batch, analysis.words())]
                if scores:
                    spans = [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in batch]
                    for doc, probabilities in zip(batch, analysis.entity_probabilities(spans)):
                        for ent, probability in zip(doc.ents, probabilities):
                            ent._.score = probability
            yield from batch

    def initialize(self, get_examples=None, *, nlp=None) -> None:
        if self.tagger is None:
            raise ValueError(
                f"{self.name}: nothing to initialize from examples; its weights come from LAC's sdist "
                "(spacy_cner.pretrained.lac_pipeline.build_pipeline)."
            )

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return srsly.msgpack_dumps(tagger_files(self.tagger, self.name))

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "LacTaggerComponent":
        self.tagger = tagger_from_files(srsly.msgpack_loads(bytes_data))
        return self

    def to_disk(self, path: Union[str, Path], *, exclude=tuple()) -> None:
        write_tagger_files(tagger_files(self.tagger, self.name), path)

    def from_disk(self, path: Union[str, Path], *, exclude=tuple()) -> "LacTaggerComponent":
        self.tagger = tagger_from_files(read_tagger_files(path, f"the pipeline's {self.name}/"), f"{path}/")
        return self


def annotate(doc: Doc, words: Sequence[str], tags: Sequence[str], merge: bool) -> Doc:
    """The doc of LAC's (words, tags) over doc's text, each PER/LOC/ORG/TIME word an entity. merge: a new doc
    whose tokens are the words (their surrounding whitespace left out, as a tokenizer would: a single space after
    a word its whitespace, other whitespace a token), doc's user data (extension values) carried over; else doc's
    own tokens, each tagged with the tag of the word holding its first character, an entity over the tokens its
    word's characters touch. Linear in the doc's length (spaCy's retokenizer and char_span are not)."""
    if merge:
        return words_doc(doc, words, tags)
    lengths = numpy.fromiter((len(word) for word in words), dtype="int64", count=len(words))
    ends = numpy.cumsum(lengths)
    if len(doc):
        token_starts, token_lengths = doc.to_array([IDX, LENGTH]).astype("int64").T
        pos_tags = [ENTITY_POS.get(tag, tag) for tag in tags]
        hashes = numpy.asarray([doc.vocab.strings.add(tag) for tag in pos_tags], dtype="uint64")
        word_of_token = numpy.minimum(numpy.searchsorted(ends, token_starts, side="right"), len(words) - 1)
        doc.from_array([TAG], hashes[word_of_token].reshape(-1, 1))
        token_ends = token_starts + token_lengths
        entities = []
        for index in [index for index, tag in enumerate(tags) if tag in ENTITY_POS]:
            word = words[index]
            left = int(ends[index]) - len(word.lstrip())
            right = int(ends[index]) - (len(word) - len(word.rstrip()))
            if right <= left:
                continue
            first = int(numpy.searchsorted(token_ends, left, side="right"))  # the token holding left ("expand")
            last = int(numpy.searchsorted(token_starts, right, side="left"))  # past the last token starting before
            if first < last:
                entities.append(Span(doc, first, last, label=tags[index]))
        doc.ents = spacy.util.filter_spans(entities)
    return doc


def words_doc(doc: Doc, words: Sequence[str], tags: Sequence[str]) -> Doc:
    """annotate with merge: a new doc, one token per word."""
    annotated = len(doc) and any(
        doc.has_annotation(attr) for attr in ("TAG", "POS", "MORPH", "LEMMA", "DEP", "ENT_IOB")
    )
    if annotated or len(doc.spans):
        raise ValueError(
            f"{LAC_COMPONENT} with tokens 'words' retokenizes the doc and found annotations on it (a component "
            f"before it set them: {doc.text[:30]!r}): put it first after the tokenizer, or use tokens 'chars'."
        )
    token_words: List[str] = []
    spaces: List[bool] = []
    token_tags: List[str] = []
    entities: List[str] = []
    for word, tag in zip(words, tags):
        if tag == SPACE_TAG or not word.strip():
            words_doc_space(word, ENTITY_POS.get(tag, tag), token_words, spaces, token_tags, entities)
            continue
        core = word.strip()
        if len(core) != len(word):  # whitespace at its edges (read_words' words have none)
            lead = word[: len(word) - len(word.lstrip())]
            if lead:
                words_doc_space(lead, ENTITY_POS.get(tag, tag), token_words, spaces, token_tags, entities)
        token_words.append(core)
        spaces.append(False)
        token_tags.append(tag)
        entities.append(tag if tag in ENTITY_POS else "")
        if len(core) != len(word):
            trail = word[len(word.rstrip()) :]
            if trail:
                words_doc_space(trail, ENTITY_POS.get(tag, tag), token_words, spaces, token_tags, entities)
    new = Doc(doc.vocab, words=token_words, spaces=spaces)
    if token_words:
        strings = doc.vocab.strings
        hashes = {tag: strings.add(ENTITY_POS.get(tag, tag)) for tag in set(token_tags)}
        labels = {label: strings.add(label) for label in set(entities) if label}
        # ENT_IOB 3 (B) and the label's hash for an entity word, else 2 (O) and 0.
        values = [
            (hashes[tag], 3, labels[label]) if label else (hashes[tag], 2, 0)
            for tag, label in zip(token_tags, entities)
        ]
        new.from_array([TAG, ENT_IOB, ENT_TYPE], numpy.asarray(values, dtype="uint64"))
    new.user_data.update(doc.user_data)
    # nlp.pipe(as_tuples=True) reads each doc's context back from the doc it gets (annotate, serve).
    new._context = doc._context
    return new


def words_doc_space(
    space: str, tag: str, token_words: List[str], spaces: List[bool], token_tags: List[str], entities: List[str]
) -> None:
    """words_doc's whitespace inside a word's edges: a single space after a token is its whitespace, else a token."""
    if space[0] == " " and token_words and not spaces[-1]:
        spaces[-1] = True
        space = space[1:]
    if space:
        token_words.append(space)
        spaces.append(False)
        token_tags.append(tag)
        entities.append("")


def tagger_files(tagger: Optional[LacTagger], owner: str) -> Dict[str, bytes]:
    """The tagger's weights (npz), its network's sizes, lexicon and segment dictionary (json), by FILES name; cfg
    holds the other files' sha256, checked at load (as crf_ner's cfg holds its model's)."""
    if tagger is None:
        raise ValueError(f"{owner} has no weights to save.")
    network = tagger.network
    lexicon = tagger.lexicon
    sizes = {
        "vocab_size": network.embedding.num_embeddings,
        "input_width": network.embedding.embedding_dim,
        "hidden_width": network.layers[0].forward_gru.hidden_width,
        "tag_count": network.emission.out_features,
    }
    buffer = io.BytesIO()
    numpy.savez(buffer, **{name: value.numpy() for name, value in network.state_dict().items()})
    files = {
        "lexicon": srsly.json_dumps(
            {"vocabulary": lexicon.vocabulary, "replacements": lexicon.replacements, "tags": lexicon.tags}
        ).encode("utf8"),
        "segment_dictionary": srsly.json_dumps(
            {"words": tagger.segmenter.words, "total_count": tagger.segmenter.total_count}
        ).encode("utf8"),
        "weights": buffer.getvalue(),
    }
    sizes["sha256"] = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    return {"cfg": srsly.json_dumps(sizes).encode("utf8"), **files}


def tagger_from_files(data: Dict[str, bytes], source: str = "lac_tagger's bytes: ") -> LacTagger:
    """The tagger that tagger_files wrote, each file checked against its sha256 in cfg (when cfg has them: a
    pipeline written before had none) and read, or a ValueError naming the file.

    source (str): Where the files are, before their names in the messages (a folder and "/").
    """

    def where(name: str) -> str:
        return f"{source}{_file_name(name)}"

    cfg = _json_file(data, "cfg", where)
    for name, expected in (cfg.get("sha256") or {}).items():
        found = hashlib.sha256(data[name]).hexdigest() if name in data else None
        if found != expected:
            raise ValueError(
                f"{where(name)} does not match the checksum saved with it in {where('cfg')} (sha256 "
                f"{str(expected)[:12]}..., the file's {str(found)[:12]}...): it is truncated or altered. Write the "
                "pipeline again (`python -m spacy_cner pretrained pipeline NAME --force`)."
            )
    lexicon = _json_file(data, "lexicon", where)
    segment = _json_file(data, "segment_dictionary", where)
    try:
        network = LacNetwork(cfg["vocab_size"], cfg["input_width"], cfg["hidden_width"], cfg["tag_count"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{where('cfg')}: not the sizes of LAC's network ({type(err).__name__}: {err}).") from None
    try:
        with numpy.load(io.BytesIO(data["weights"]), allow_pickle=False) as arrays:
            network.load_state_dict({name: torch.from_numpy(arrays[name]) for name in arrays.files})
    except (KeyError, TypeError, ValueError, RuntimeError, OSError, zipfile.BadZipFile) as err:
        raise ValueError(
            f"{where('weights')} cannot be read as the weights of the network {where('cfg')} sizes "
            f"({type(err).__name__}: {str(err).splitlines()[0][:200]})."
        ) from None
    try:
        return LacTagger(
            network,
            Lexicon(lexicon["vocabulary"], lexicon["replacements"], lexicon["tags"]),
            DictionarySegmenter(segment["words"], segment["total_count"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(
            f"{where('lexicon')} or {where('segment_dictionary')}: not the tagger's dictionaries "
            f"({type(err).__name__}: {err})."
        ) from None


def _json_file(data: Dict[str, bytes], name: str, where: Callable[[str], str]) -> Dict:
    """One of the tagger's JSON files as a dict, or a ValueError naming it."""
    try:
        value = srsly.json_loads(data[name])
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{where(name)} is not valid JSON ({err}): restore the file written with the pipeline."
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{where(name)}: expected a JSON object, got {type(value).__name__}.")
    return value


def write_tagger_files(data: Dict[str, bytes], path: Union[str, Path]) -> None:
    path = ensure_path(path)
    path.mkdir(parents=True, exist_ok=True)
    for name, content in data.items():
        (path / _file_name(name)).write_bytes(content)


def read_tagger_files(path: Union[str, Path], what: str) -> Dict[str, bytes]:
    path = ensure_path(path)
    missing = [_file_name(name) for name in FILES if not (path / _file_name(name)).exists()]
    if missing:
        raise ValueError(
            f"{path}: {', '.join(missing)} missing: not {what} folder (written by `python -m spacy_cner "
            "pretrained pipeline`)."
        )
    return {name: (path / _file_name(name)).read_bytes() for name in FILES}


@registry.tokenizers(LAC_TOKENIZER)
def create_lac_tokenizer(
    tokens: str = "words", torch_threads: Optional[int] = 1
) -> Callable[[Language], "LacTokenizer"]:
    """A tokenizer running LAC's tagger (weights from the pipeline's tokenizer folder, or build_pipeline).

    tokens (str): "words" (LAC's words) or "chars" (one token per character, tags and entities the same).
    torch_threads (Optional[int]): torch's threads while LAC's network runs (make_lac_tagger's).
    """
    if tokens not in TOKENS:
        raise ValueError(f"LacTokenizer: tokens must be one of {TOKENS}, got {tokens!r}.")
    check_threads(torch_threads, "LacTokenizer")

    def lac_tokenizer_factory(nlp: Language) -> "LacTokenizer":
        return LacTokenizer(nlp.vocab, tokens=tokens, torch_threads=torch_threads)

    return lac_tokenizer_factory


class LacTokenizer(DummyTokenizer):
    """Tokens, tags and entities from LAC's tagger (lac_analyzer.LacTagger).

    vocab (Vocab): The pipeline's vocab.
    tokens (str): "words" or "chars".
    tagger (Optional[LacTagger]): The analyser; None until from_disk / from_bytes (or set by build_pipeline).
    torch_threads (Optional[int]): torch's threads while LAC's network runs (make_lac_tagger's).
    """

    def __init__(
        self, vocab: Vocab, tokens: str = "words", tagger: Optional[LacTagger] = None, torch_threads: Optional[int] = 1
    ):
        self.vocab = vocab
        self.tokens = tokens
        self.tagger = tagger
        self.torch_threads = check_threads(torch_threads, "LacTokenizer")

    def __call__(self, text: str) -> Doc:
        return next(self.pipe([text]))

    def pipe(self, texts: Iterable[str], batch_size: int = 32) -> Iterator[Doc]:
        """The docs of texts, LAC run over batch_size texts at a time."""
        if self.tagger is None:
            raise ValueError(
                "LacTokenizer has no weights: load a pipeline written by `python -m spacy_cner "
                "pretrained pipeline`, or build one with "
                "spacy_cner.pretrained.lac_pipeline.build_pipeline."
            )
        batch: List[str] = []
        for text in texts:
            _check_encodable(text)
            batch.append(text)
            if len(batch) >= batch_size:
                yield from self._docs(batch)
                batch = []
        if batch:
            yield from self._docs(batch)

    def _docs(self, texts: Sequence[str]) -> Iterator[Doc]:
        assert self.tagger is not None
        with torch_threads(self.torch_threads):
            char_tags = self.tagger.char_tags(texts)
        for text, tags in zip(texts, char_tags):
            yield self.make_doc(text, *read_words(text, tags))

    def make_doc(self, text: str, words: Sequence[str], tags: Sequence[str]) -> Doc:
        """The doc of LAC's (words, tags) over text: a word's surrounding whitespace becomes spaCy's (a
        trailing space, or its own token), each token takes the tag of the word holding its first character."""
        pieces = list(text) if self.tokens == "chars" else [word.strip() or word for word in words]
        token_words, spaces = words_and_spaces(pieces, text)
        return annotate(Doc(self.vocab, words=token_words, spaces=spaces), words, tags, merge=False)

    # --- serialization: the tagger's weights and dictionaries --------------------------------------------------

    def _serialize(self) -> Dict[str, bytes]:
        data = tagger_files(self.tagger, "LacTokenizer")
        data["cfg"] = srsly.json_dumps({"tokens": self.tokens, **srsly.json_loads(data["cfg"])}).encode("utf8")
        return data

    def _deserialize(self, data: Dict[str, bytes], source: str = "LacTokenizer's bytes: ") -> "LacTokenizer":
        self.tagger = tagger_from_files(data, source)
        self.tokens = srsly.json_loads(data["cfg"])["tokens"]
        return self

    def to_bytes(self, **kwargs) -> bytes:
        return srsly.msgpack_dumps(self._serialize())

    def from_bytes(self, data: bytes, **kwargs) -> "LacTokenizer":
        return self._deserialize(srsly.msgpack_loads(data))

    def to_disk(self, path: Union[str, Path], **kwargs) -> None:
        write_tagger_files(self._serialize(), path)

    def from_disk(self, path: Union[str, Path], **kwargs) -> "LacTokenizer":
        return self._deserialize(read_tagger_files(path, "a LacTokenizer"), f"{path}/")


def build_pipeline(lac: LacFiles, tokens: str = "words", window_size: int = 256) -> Language:
    """A Chinese pipeline: spaCy's character tokenizer, then LAC's tagger (lac_tagger) read from the checked sdist.

    lac (LacFiles): The sdist's files (lac.open_lac).
    tokens (str): "words" or "chars".
    window_size (int): See make_lac_tagger.
    RETURNS (Language): The pipeline, LAC credited in its meta.
    """
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1"}}})
    component = nlp.add_pipe(LAC_COMPONENT, config={"tokens": tokens, "window_size": window_size})
    component.tagger = tagger_from_sdist(lac)
    nlp.meta.update(
        {
            "name": "lac",
            "version": "2.1.2",
            "description": DESCRIPTION,
            "license": "Apache-2.0",
            "author": "Baidu NLP (LAC); converted by spacy_cner",
            "url": LAC_CREDIT["url"],
            "requirements": [f"spacy-cner>={__version__}"],
        }
    )
    nlp.meta["sources"] = [
        source for source in nlp.meta.get("sources") or [] if source.get("name") != PIPELINE_CREDIT["name"]
    ]
    nlp.meta["sources"].append(dict(PIPELINE_CREDIT))
    return nlp


def is_lac_pipeline(path: Union[str, Path]) -> bool:
    """Whether the folder holds a pipeline build_pipeline wrote (its meta lists lac_tagger alone and credits LAC)."""
    try:
        meta = srsly.read_json(ensure_path(path) / "meta.json")
    except (OSError, ValueError):
        return False
    sources = meta.get("sources") or [] if isinstance(meta, dict) else []
    return (
        meta.get("pipeline") == [LAC_COMPONENT]
        and isinstance(sources, list)
        and any(isinstance(source, dict) and source.get("name") == PIPELINE_CREDIT["name"] for source in sources)
    )


def _file_name(name: str) -> str:
    return f"{name}.npz" if name == "weights" else f"{name}.json"
