"""Baidu's LAC (lexical analysis of Chinese, Apache-2.0) read from its PyPI sdist: vocabularies and tensors.

Only the files named in MEMBERS are read, straight out of the tarball (nothing is extracted and no
code of the package runs), each checked for its shape and dtype; the tarball itself is checked by
sha256 first (fetch.py). What is read:
- `lac_model/conf/word.dic`: `id<TAB>token` lines, ids 0..58223 in order: single characters, then
  words (the tagger reads words the segmenter finds that are in it as one id), `OOV` last;
- `lac_model/conf/q2b.dic`: `from<TAB>to` lines, the replacement LAC applies to each word (or
  character) before looking it up: full-width forms to half-width, traditional to simplified;
- `lac_model/model/word_emb`: float32 [58224, 128], the tagger's input embedding of each id;
- for the networks rebuilt in torch (lac_net.py, lac_analyzer.py): each model's other tensor files
  (fc_0..fc_4, gru_0..gru_3, crfw, see network_shapes), `conf/tag.dic` (its tags by id) and, for the
  tagger, `lac_model/conf/small_seg.dic` (the word list of the dictionary segmenter that chooses its
  word ids); the segmenter's own `seg_model/conf/word.dic` (8,224 characters) and `q2b.dic`.
"""

import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy

from .fetch import Sdist, fetch_sdist
from .paddle_tensor import read_tensor

LAC_SDIST = Sdist(
    project="lac",
    version="2.1.2",
    filename="LAC-2.1.2.tar.gz",
    sha256="22fcde0d5082d2044205ea6f6a7a9cd1f0d63e7b21b2dd5c9c73f27e7c0a3ef1",
    size=64_818_010,
)
# What the pipelines built from it say about where their weights come from.
LAC_CREDIT = {
    "name": "LAC (Lexical Analysis of Chinese) 2.1.2, Baidu",
    "url": "https://github.com/baidu/lac",
    "license": "Apache-2.0",
    "files": "LAC/lac_model/model/word_emb, LAC/lac_model/conf/word.dic, LAC/lac_model/conf/q2b.dic",
}
ROOT = "LAC-2.1.2/LAC/"
WORD_DIC = "lac_model/conf/word.dic"
Q2B_DIC = "lac_model/conf/q2b.dic"
WORD_EMB = "lac_model/model/word_emb"
VOCAB_SIZE = 58224
EMB_WIDTH = 128
OOV = "OOV"
# The two networks (conf/args.ini of each): input width, GRU width, vocabulary and tag counts.
TAGGER, SEGMENTER = "lac_model", "seg_model"
HIDDEN_WIDTH = 128
SEG_VOCAB_SIZE = 8224
SEG_WIDTH = 96
TAG_COUNTS = {TAGGER: 49, SEGMENTER: 4}


class LacFiles:
    """The LAC files of one checked sdist, read on demand (each file once).

    sdist (Union[str, Path]): The tarball (see open_lac for fetching it).
    """

    def __init__(self, sdist: Union[str, Path]):
        self.path = Path(sdist)
        self._read: Dict[str, bytes] = {}

    def read(self, *names: str) -> List[bytes]:
        """The bytes of the files (paths under LAC/), in one pass over the tarball."""
        wanted = {ROOT + name: name for name in names if name not in self._read}
        if wanted:
            with tarfile.open(self.path, "r:gz") as archive:
                for member in archive:
                    if member.name in wanted:
                        if not member.isfile():
                            raise ValueError(f"{self.path}: {member.name} is not a regular file.")
                        extracted = archive.extractfile(member)
                        assert extracted is not None
                        self._read[wanted.pop(member.name)] = extracted.read()
            if wanted:
                raise ValueError(f"{self.path}: {', '.join(sorted(wanted))} missing from the archive.")
        return [self._read[name] for name in names]

    def vocabulary(self) -> List[str]:
        """The tokens of word.dic, by id (OOV last)."""
        (data,) = self.read(WORD_DIC)
        return parse_word_dic(data, f"{self.path}:{WORD_DIC}", VOCAB_SIZE)

    def replacements(self) -> Dict[str, str]:
        """q2b.dic: the replacement of each form LAC normalises before lookup."""
        (data,) = self.read(Q2B_DIC)
        return parse_q2b(data, f"{self.path}:{Q2B_DIC}")

    def tensor(self, name: str) -> numpy.ndarray:
        """A tensor file under LAC/, checked against tensor_shapes() (float32)."""
        (data,) = self.read(name)
        return read_tensor(data, f"{self.path}:{name}", shape=tensor_shapes().get(name), dtype="float32")

    def word_embeddings(self) -> Tuple[List[str], numpy.ndarray]:
        """The vocabulary and word_emb's rows, both by id (OOV's row included)."""
        self.read(WORD_DIC, WORD_EMB)
        return self.vocabulary(), self.tensor(WORD_EMB)

    def network(self, model: str) -> Dict[str, numpy.ndarray]:
        """All tensors of one network (TAGGER or SEGMENTER) by file name (fc_0.w_0 ...), shapes checked."""
        shapes = network_shapes(model)
        self.read(*shapes)
        return {name.rsplit("/", 1)[1]: self.tensor(name) for name in shapes}

    def model_vocabulary(self, model: str) -> List[str]:
        """conf/word.dic of a model, by id."""
        name = f"{model}/conf/word.dic"
        (data,) = self.read(name)
        return parse_word_dic(data, f"{self.path}:{name}", VOCAB_SIZE if model == TAGGER else SEG_VOCAB_SIZE)

    def model_replacements(self, model: str) -> Dict[str, str]:
        """conf/q2b.dic of a model."""
        name = f"{model}/conf/q2b.dic"
        (data,) = self.read(name)
        return parse_q2b(data, f"{self.path}:{name}")

    def tags(self, model: str) -> List[str]:
        """conf/tag.dic of a model: its tags by id, as LAC's reader reads them (a later line for an id wins:
        the tagger's PER-B, LOC-B, ORG-B, TIME-B ... replace nr-B, ns-B, nt-B, t-B)."""
        name = f"{model}/conf/tag.dic"
        (data,) = self.read(name)
        return parse_tag_dic(data, f"{self.path}:{name}", TAG_COUNTS[model])

    def segment_dictionary(self) -> Tuple[List[str], int]:
        """lac_model/conf/small_seg.dic: its words and the sum of their counts."""
        name = f"{TAGGER}/conf/small_seg.dic"
        (data,) = self.read(name)
        return parse_seg_dic(data, f"{self.path}:{name}")


def tensor_shapes() -> Dict[str, Tuple[int, ...]]:
    """The files read by this module and the shapes their tensors must have."""
    return {WORD_EMB: (VOCAB_SIZE, EMB_WIDTH), **network_shapes(TAGGER), **network_shapes(SEGMENTER)}


def network_shapes(model: str) -> Dict[str, Tuple[int, ...]]:
    """The tensor files of one network (LAC/nets.py, `lex_net` with bigru_num 2) and their shapes: per BiGRU
    layer an fc to 3 gate inputs and a GRU forward (fc_0, gru_0; fc_2, gru_2), the same reversed (fc_1,
    gru_1; fc_3, gru_3); the emission fc_4; the CRF's crfw (start row, end row, then transitions)."""
    if model not in TAG_COUNTS:
        raise ValueError(f"No LAC network {model!r}: expected {TAGGER!r} or {SEGMENTER!r}.")
    vocab, width, hidden = (
        (VOCAB_SIZE, EMB_WIDTH, HIDDEN_WIDTH) if model == TAGGER else (SEG_VOCAB_SIZE, SEG_WIDTH, SEG_WIDTH)
    )
    tags = TAG_COUNTS[model]
    shapes: Dict[str, Tuple[int, ...]] = {"word_emb": (vocab, width)}
    for layer in range(2):
        for direction in range(2):
            index = 2 * layer + direction
            shapes[f"fc_{index}.w_0"] = (width if layer == 0 else 2 * hidden, 3 * hidden)
            shapes[f"fc_{index}.b_0"] = (3 * hidden,)
            shapes[f"gru_{index}.w_0"] = (hidden, 3 * hidden)
            shapes[f"gru_{index}.b_0"] = (1, 3 * hidden)
    shapes["fc_4.w_0"] = (2 * hidden, tags)
    shapes["fc_4.b_0"] = (tags,)
    shapes["crfw"] = (tags + 2, tags)
    return {f"{model}/model/{name}": shape for name, shape in shapes.items()}


def open_lac(sdist: Optional[Union[str, Path]] = None, progress=None) -> LacFiles:
    """LacFiles of the checked LAC sdist: sdist when given (a local copy), else fetched (cached).

    sdist (Optional[Union[str, Path]]): A local copy of LAC-2.1.2.tar.gz.
    progress: Called with (bytes, total) while downloading (fetch_sdist).
    RETURNS (LacFiles): Its files.
    """
    return LacFiles(fetch_sdist(LAC_SDIST, local=sdist, progress=progress))


def parse_word_dic(data: bytes, name: str, size: Optional[int] = None) -> List[str]:
    """word.dic's tokens by id: every line `id<TAB>token` with ids 0, 1, 2 ... in order, OOV last.

    A token may be a space (id 0 is one), so lines are split on their first tab, not stripped.
    """
    tokens: List[str] = []
    for number, line in enumerate(_lines(data, name), 1):
        ident, tab, token = line.partition("\t")
        if not tab or not ident.isdigit() or int(ident) != len(tokens) or not token:
            raise ValueError(f"{name}, line {number}: expected '{len(tokens)}<TAB>token', got {line[:40]!r}.")
        tokens.append(token)
    if size is not None and len(tokens) != size:
        raise ValueError(f"{name}: {len(tokens)} entries, expected {size}.")
    if tokens and tokens[-1] != OOV:
        raise ValueError(f"{name}: the last entry is {tokens[-1]!r}, expected {OOV!r}.")
    return tokens


def parse_q2b(data: bytes, name: str) -> Dict[str, str]:
    """q2b.dic's `from<TAB>to` lines as a dict (a repeated form keeps its last target, as LAC's reader
    does; none repeats in 2.1.2)."""
    replacements: Dict[str, str] = {}
    for number, line in enumerate(_lines(data, name), 1):
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"{name}, line {number}: expected 'from<TAB>to', got {line[:40]!r}.")
        replacements[parts[0]] = parts[1]
    return replacements


def parse_tag_dic(data: bytes, name: str, size: int) -> List[str]:
    """tag.dic's `id<TAB>tag` lines as the tags by id: ids 0..size-1, each at least once; a repeated id
    takes its last line's tag (LAC's reader does: that is how the tagger outputs PER, not nr)."""
    by_id: Dict[int, str] = {}
    for number, line in enumerate(_lines(data, name), 1):
        ident, tab, tag = line.partition("\t")
        if not tab or not ident.isdigit() or not tag or int(ident) >= size:
            raise ValueError(
                f"{name}, line {number}: expected 'id<TAB>tag' with an id below {size}, got {line[:40]!r}."
            )
        by_id[int(ident)] = tag
    if len(by_id) != size:
        raise ValueError(f"{name}: tags for {len(by_id)} ids, expected {size} (0..{size - 1}).")
    return [by_id[ident] for ident in range(size)]


def parse_seg_dic(data: bytes, name: str) -> Tuple[List[str], int]:
    """small_seg.dic's `word count` lines: the words and the sum of the counts (LAC's segmenter uses only
    these: a word's own count is read and dropped, see lac_analyzer.DictionarySegmenter)."""
    words: List[str] = []
    total = 0
    for number, line in enumerate(_lines(data, name), 1):
        parts = line.strip().split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
            raise ValueError(f"{name}, line {number}: expected 'word count', got {line[:40]!r}.")
        words.append(parts[0])
        total += int(parts[1])
    if not words:
        raise ValueError(f"{name}: no words.")
    return words, total


def char_bigram_vectors(
    vocabulary: Sequence[str], vectors: numpy.ndarray, replacements: Dict[str, str], max_length: int = 2
) -> Tuple[List[str], numpy.ndarray, Dict[str, int]]:
    """LAC's rows keyed as CharBigramEmbed's vectors look tokens up: single characters and, up to
    max_length, words by their text; and each form q2b.dic replaces by one of those (a full-width or
    traditional character, a bigram of them) as an alias of its replacement's row.

    vocabulary (Sequence[str]): word.dic's tokens by id.
    vectors (numpy.ndarray): word_emb's rows by id.
    replacements (Dict[str, str]): q2b.dic.
    max_length (int): The longest word kept (2: characters and bigrams; more for SoftLexicon's words).
    RETURNS (Tuple[List[str], numpy.ndarray, Dict[str, int]]): The keys, the id (row of vectors) of
        each (an alias has its target's), and counts by kind.
    """
    if len(vocabulary) != len(vectors):
        raise ValueError(f"{len(vocabulary)} tokens for {len(vectors)} vectors.")
    row_of: Dict[str, int] = {}
    for row, token in enumerate(vocabulary):
        if token != OOV and len(token) <= max_length and not token.isspace() and token not in row_of:
            row_of[token] = row
    kept = len(row_of)
    for source, target in replacements.items():
        if source not in row_of and target in row_of and len(source) <= max_length:
            row_of[source] = row_of[target]
    keys = list(row_of)
    counts = {
        "characters": sum(1 for key in keys[:kept] if len(key) == 1),
        "bigrams": sum(1 for key in keys[:kept] if len(key) == 2),
        "longer": sum(1 for key in keys[:kept] if len(key) > 2),
        "aliases": len(keys) - kept,
    }
    return keys, numpy.asarray([row_of[key] for key in keys], dtype="int64"), counts


def _lines(data: bytes, name: str) -> List[str]:
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{name}: not UTF-8 ({err.reason} at byte {err.start}).") from err
    return [line.rstrip("\r") for line in text.split("\n") if line.rstrip("\r")]
