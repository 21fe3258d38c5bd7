"""Lexicons for the lexicon adapter (LEBERT, Liu et al. 2021): loading, and matching words to characters.

A lexicon is a list of words, optionally with frequencies, tags and word vectors. It
loads from a word list (one word per line, optional frequency and tag columns,
as jieba's dict.txt, or "word<TAB>LABEL" gazetteer lines), from word vectors in
word2vec text format (first line "count dim", as the Tencent AI Lab embeddings), or
from jieba's own dictionary. A word's tag gives its gazetteer type (entity_type).
Matching finds, for each character of a text, the lexicon words that cover it
(LEBERT's char-words pairs) with a prefix dictionary, as jieba does: from each character,
extend while the text read so far is a prefix of some word.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy
import srsly
from spacy.attrs import IDX, IS_SPACE, LENGTH, ORTH, SPACY
from spacy.tokens import Doc
from spacy.util import registry
from wasabi import msg

PathLike = Union[str, Path]
# A matched word: (start char, end char (exclusive), word index).
Match = Tuple[int, int, int]
# str.isspace()'s characters (the same set, checked over every code point).
_WHITESPACE = re.compile(r"\s")
# jieba's (ICTCLAS) part-of-speech tags that name an entity type: person, place,
# organisation, other proper noun. Its other tags (n, v, ...) mark a plain word.
JIEBA_ENTITY_TYPES = {"nr": "PER", "nrt": "PER", "nrfg": "PER", "ns": "LOC", "nt": "ORG", "nz": "MISC"}


@dataclass
class LoadStats:
    """What loading kept and left out, for the user to check."""

    path: str
    n_lines: int = 0
    n_words: int = 0
    too_short: int = 0
    too_long: int = 0
    too_rare: int = 0
    duplicates: int = 0
    over_max_words: int = 0


class Lexicon:
    """Words (and optionally frequencies and vectors) with a trie for matching them in text."""

    def __init__(
        self,
        words: Sequence[str],
        vectors: Optional[numpy.ndarray] = None,
        frequencies: Optional[Sequence[int]] = None,
        tags: Optional[Sequence[str]] = None,
    ) -> None:
        """words (Sequence[str]): Unique, non-empty words without whitespace.
        vectors (Optional[numpy.ndarray]): (len(words), dim) float vectors, one row per word.
        frequencies (Optional[Sequence[int]]): One count per word.
        tags (Optional[Sequence[str]]): One tag per word ("" for none): a part-of-speech
            tag (jieba's nr, ns, ...) or a gazetteer label (PER, BRAND, ...).
        """
        self.words = list(words)
        # Checked in bulk (C loops: a saved pipeline's 337k words are checked at every load); the
        # loops below only run to name the first bad word.
        if not _all_strings(self.words):
            bad = next(i for i, word in enumerate(self.words) if not isinstance(word, str))
            raise ValueError(f"Invalid lexicon word {self.words[bad]!r} (entry {bad}): words are strings.")
        self.index: Dict[str, int] = dict(zip(self.words, range(len(self.words))))
        if len(self.index) != len(self.words) or "" in self.index or _WHITESPACE.search("".join(self.words)):
            seen: Dict[str, int] = {}
            for i, word in enumerate(self.words):
                if not word or any(c.isspace() for c in word):
                    raise ValueError(
                        f"Invalid lexicon word {word!r} (entry {i}): words are non-empty, without whitespace."
                    )
                if word in seen:
                    raise ValueError(f"Lexicon word {word!r} occurs twice (entries {seen[word]} and {i}).")
                seen[word] = i
        if vectors is not None:
            vectors = numpy.asarray(vectors, dtype="float32")
            if vectors.ndim != 2 or len(vectors) != len(self.words):
                raise ValueError(f"Lexicon vectors have shape {vectors.shape}; expected ({len(self.words)}, dim).")
        if frequencies is not None and len(frequencies) != len(self.words):
            raise ValueError(f"Got {len(frequencies)} frequencies for {len(self.words)} lexicon words.")
        if tags is not None:
            tags = list(tags)
            if len(tags) != len(self.words):
                raise ValueError(f"Got {len(tags)} tags for {len(self.words)} lexicon words.")
            if not _all_strings(tags) or "\n" in "".join(tags):
                bad = next(i for i, tag in enumerate(tags) if not isinstance(tag, str) or "\n" in tag)
                raise ValueError(
                    f"Invalid tag {tags[bad]!r} of lexicon word {self.words[bad]!r}: tags are one-line strings."
                )
        self.vectors = vectors
        self.frequencies = None if frequencies is None else numpy.asarray(frequencies, dtype="int64")
        self.tags = tags
        self.max_word_length = max(map(len, self.words), default=0)
        self._prefixes: Optional[Dict[str, int]] = None
        # The prefixes that are no word, "\n"-joined, when read from bytes that hold them.
        self._saved_prefixes: Optional[str] = None
        self._types: Optional[Tuple[List[str], numpy.ndarray]] = None

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    @property
    def prefixes(self) -> Dict[str, int]:
        """Every word and every prefix of a word -> the word's index, or -1 for a prefix that
        is no word; built on first use, or read from saved bytes, which hold the prefixes
        (BENCHMARKS.md#lexicon).

        (A pygtrie trie did the same slower, took longer to build and more memory.)
        """
        if self._prefixes is None:
            if self._saved_prefixes is not None:
                keys = self._saved_prefixes.split("\n") if self._saved_prefixes else []
                self._saved_prefixes = None
            else:
                keys = (word[:end] for word in self.words for end in range(1, len(word)))
            prefixes = dict.fromkeys(keys, -1)
            prefixes.update(self.index)
            self._prefixes = prefixes
        return self._prefixes

    def entity_types(self) -> Tuple[List[str], numpy.ndarray]:
        """The gazetteer types and each word's type index (0, "", for a word without one).

        A jieba part-of-speech tag maps by JIEBA_ENTITY_TYPES (nr -> PER, ns -> LOC, nt -> ORG,
        nz -> MISC) and jieba's other tags (lower-case letters: n, v, ...) to no type; any other
        tag is a gazetteer label and its own type. Types after "" are sorted.
        RETURNS (Tuple[List[str], numpy.ndarray]): The type names and an int array, one per word.
        """
        if self._types is None:
            tags = self.tags or [""] * len(self.words)
            type_of = {tag: entity_type(tag) for tag in set(tags)}  # a few dozen distinct tags
            names = [""] + sorted(set(type_of.values()) - {""})
            index = {tag: names.index(name) for tag, name in type_of.items()}
            self._types = (names, numpy.asarray([index[tag] for tag in tags], dtype="int64"))
        return self._types

    def find(self, text: str) -> List[Match]:
        """Every occurrence of every lexicon word in text, by start then length."""
        get = self.prefixes.get
        n = len(text)
        found = []
        for start in range(n):
            end = start + 1
            while end <= n:
                i = get(text[start:end])
                if i is None:
                    break
                if i >= 0:
                    found.append((start, end, i))
                end += 1
        return found

    def match(self, text: str, max_words_per_char: int) -> List[List[Match]]:
        """For each character, the words that cover it, at most max_words_per_char of them.

        When more words cover a character, the longest are kept (then the earliest):
        LEBERT keeps the shortest and earliest, which drops whole entities such as
        长江大桥 in 南京市长江大桥 with a cap of 3, while the short words it keeps are
        mostly inside the long ones. Within each character's list, words are in text order.
        """
        if max_words_per_char < 1:
            raise ValueError(f"max_words_per_char must be at least 1, got {max_words_per_char}.")
        covering: List[List[Match]] = [[] for _ in text]
        for match in self.find(text):
            for position in range(match[0], match[1]):
                covering[position].append(match)
        return [_longest_first(words, max_words_per_char) for words in covering]

    def match_spans(self, text: str, spans: Sequence[Tuple[int, int]], max_words_per_char: int) -> List[List[Match]]:
        """For each (start, end) character span of text (a token, a wordpiece), the words
        that cover any of its characters, with match's cap and policy."""
        per_char = self.match(text, max_words_per_char)
        result = []
        for start, end in spans:
            if end - start == 1:
                result.append(per_char[start])
                continue
            words = {m for chars in per_char[start:end] for m in chars}
            result.append(_longest_first(list(words), max_words_per_char))
        return result

    def word_ids(self, text: str, spans: Sequence[Tuple[int, int]], max_words_per_char: int) -> numpy.ndarray:
        """match_spans as an array (n_spans, max_words_per_char) of word indices, -1 for none."""
        ids = numpy.full((len(spans), max_words_per_char), -1, dtype="int64")
        for i, words in enumerate(self.match_spans(text, spans, max_words_per_char)):
            ids[i, : len(words)] = [m[2] for m in words]
        return ids

    def __getstate__(self) -> Dict:
        # The prefix index is rebuilt on first use: pickles stay small (nlp.pipe with n_process > 1).
        state = dict(self.__dict__)
        state["_prefixes"] = None
        state["_types"] = None
        return state

    # Loading

    @classmethod
    def from_word_list(
        cls,
        path: PathLike,
        *,
        min_word_length: int = 2,
        max_word_length: Optional[int] = None,
        min_frequency: Optional[int] = None,
        max_words: Optional[int] = None,
        encoding: str = "utf8",
    ) -> Tuple["Lexicon", LoadStats]:
        """Load "word [frequency] [tag]" lines (jieba's dict.txt format) or "word<TAB>LABEL"
        gazetteer lines (whitespace-separated); blank lines are skipped.

        min_word_length (int): Shorter words are left out; single characters are the
            model's own tokens already.
        max_word_length (Optional[int]): Longer words are left out.
        min_frequency (Optional[int]): Words with a lower frequency are left out (needs
            a frequency on every line).
        max_words (Optional[int]): Keep the most frequent words (file order without frequencies).
        RETURNS (Tuple[Lexicon, LoadStats]): The lexicon and what was left out.
        """
        stats = LoadStats(path=str(path))
        entries: Dict[str, Optional[int]] = {}
        entry_tags: Dict[str, str] = {}
        with open(path, encoding=encoding) as file_:
            for line_number, line in enumerate(file_, start=1):
                stats.n_lines += 1
                fields = line.lstrip("\ufeff").split()
                if not fields:
                    continue
                word, frequency, tag = fields[0], None, ""
                if len(fields) > 1 and _is_int(fields[1]):
                    frequency = int(fields[1])
                elif min_frequency is not None:
                    raise ValueError(
                        f"{path}, line {line_number}: min_frequency is set but the line has no "
                        f"frequency: {line.strip()!r}"
                    )
                if len(fields) > 3 or (len(fields) == 3 and frequency is None):
                    raise ValueError(
                        f"{path}, line {line_number}: expected 'word [frequency] [tag]' or 'word<TAB>LABEL', "
                        f"got {line.strip()!r}"
                    )
                if len(fields) > 1 and frequency is None or len(fields) == 3:
                    tag = fields[-1]
                if not _keep(word, frequency, min_word_length, max_word_length, min_frequency, stats):
                    continue
                if word in entries:
                    stats.duplicates += 1
                    continue
                entries[word] = frequency
                entry_tags[word] = tag
        words = list(entries)
        frequencies = list(entries.values())
        tags = [entry_tags[word] for word in words]
        has_frequencies = all(f is not None for f in frequencies)
        if max_words is not None and len(words) > max_words:
            stats.over_max_words = len(words) - max_words
            if has_frequencies:
                order = sorted(range(len(words)), key=lambda i: -frequencies[i])[:max_words]
                order.sort()
                words = [words[i] for i in order]
                frequencies = [frequencies[i] for i in order]
                tags = [tags[i] for i in order]
            else:
                words, frequencies, tags = words[:max_words], frequencies[:max_words], tags[:max_words]
        stats.n_words = len(words)
        return cls(
            words,
            frequencies=frequencies if has_frequencies and words else None,
            tags=tags if any(tags) else None,
        ), stats

    @classmethod
    def from_word2vec(
        cls,
        path: PathLike,
        *,
        min_word_length: int = 2,
        max_word_length: Optional[int] = None,
        max_words: Optional[int] = None,
        encoding: str = "utf8",
    ) -> Tuple["Lexicon", LoadStats]:
        """Load word vectors in word2vec text format: "count dim", then "word v1 ... v_dim" lines.

        Lines must hold exactly dim numbers, and the file `count` vectors (else an error
        names the line or the file): a truncated download fails instead of loading part
        of it. max_words stops reading after that many kept words (these files are sorted
        by frequency); the count is then not checked.
        RETURNS (Tuple[Lexicon, LoadStats]): The lexicon with its vectors, and what was left out.
        """
        stats = LoadStats(path=str(path))
        words: List[str] = []
        seen = set()
        n_vectors = 0
        with open(path, encoding=encoding) as file_:
            header = file_.readline().lstrip("\ufeff").split()
            if len(header) != 2 or not all(_is_int(value) for value in header):
                raise ValueError(f"{path}, line 1: expected the word2vec header 'count dim', got {' '.join(header)!r}")
            count, dim = int(header[0]), int(header[1])
            # Filled in place: no list of rows next to the matrix at the peak.
            vectors = numpy.empty((count if max_words is None else min(count, max_words), dim), dtype="float32")
            for line_number, line in enumerate(file_, start=2):
                stats.n_lines += 1
                fields = line.split()
                if not fields:
                    continue
                if max_words is not None and len(words) >= max_words:
                    stats.over_max_words = count - n_vectors
                    break
                n_vectors += 1
                word = fields[0]
                if n_vectors > count:
                    raise ValueError(f"{path}, line {line_number}: more vectors than the header's {count}")
                if len(fields) != dim + 1:
                    raise ValueError(
                        f"{path}, line {line_number}: expected a word and {dim} numbers, got "
                        f"{len(fields) - 1} values after {word!r}"
                    )
                if not _keep(word, None, min_word_length, max_word_length, None, stats):
                    continue
                if word in seen:
                    stats.duplicates += 1
                    continue
                try:
                    vectors[len(words)] = fields[1:]
                except ValueError as error:
                    raise ValueError(f"{path}, line {line_number}: {error}") from error
                seen.add(word)
                words.append(word)
        if n_vectors != count and not stats.over_max_words:
            raise ValueError(f"{path}: the header says {count} vectors but the file has {n_vectors} (truncated?)")
        stats.n_words = len(words)
        if len(words) < len(vectors):
            vectors = vectors[: len(words)].copy()
        return cls(words, vectors=vectors), stats

    @classmethod
    def from_jieba(cls, **options) -> Tuple["Lexicon", LoadStats]:
        """jieba's installed dictionary (about 350k words; jieba is a requirement of spacy-cner).

        options: as for from_word_list.
        """
        try:
            import jieba
        except ImportError as error:
            raise ImportError("The jieba lexicon needs jieba: pip install jieba (or give a word list).") from error
        return cls.from_word_list(Path(jieba.__file__).parent / "dict.txt", **options)

    # Serialisation: words as one string, vectors as float16 bytes.

    def to_bytes(self) -> bytes:
        """The lexicon as bytes (vectors stored in float16, half the size of float32)."""
        msg = {"words": "\n".join(self.words), "frequencies": None, "vectors": None}
        # The matching dictionary's other keys, so that loading need not cut every word again.
        msg["prefixes"] = "\n".join(prefix for prefix, index in self.prefixes.items() if index < 0)
        if self.tags is not None:
            msg["tags"] = "\n".join(self.tags)
        if self.frequencies is not None:
            msg["frequencies"] = self.frequencies.astype("<i8").tobytes()
        if self.vectors is not None:
            msg["vectors"] = self.vectors.astype("<f2").tobytes()
            msg["dim"] = int(self.vectors.shape[1])
        return srsly.msgpack_dumps(msg)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Lexicon":
        msg = srsly.msgpack_loads(data)
        words = msg["words"].split("\n") if msg["words"] else []
        frequencies = None if msg["frequencies"] is None else numpy.frombuffer(msg["frequencies"], dtype="<i8")
        vectors = None
        if msg["vectors"] is not None:
            vectors = numpy.frombuffer(msg["vectors"], dtype="<f2").reshape(len(words), msg["dim"]).astype("float32")
        tags = msg["tags"].split("\n") if msg.get("tags") is not None else None
        lexicon = cls(words, vectors=vectors, frequencies=frequencies, tags=tags)
        lexicon._saved_prefixes = msg.get("prefixes")  # absent in lexicons saved by earlier versions
        return lexicon


def _all_strings(items: Sequence) -> bool:
    return all(issubclass(kind, str) for kind in set(map(type, items)))


def entity_type(tag: str) -> str:
    """A lexicon tag's gazetteer type: see Lexicon.entity_types."""
    if tag in JIEBA_ENTITY_TYPES:
        return JIEBA_ENTITY_TYPES[tag]
    if tag.isascii() and tag.isalpha() and tag.islower():
        return ""  # another part-of-speech tag
    return tag


def doc_text(doc: Doc) -> str:
    """doc.text, read with Doc.to_array and the string store: Doc.text makes a Token object per
    token to join their texts."""
    strings = doc.vocab.strings
    orths, spaces = doc.to_array([ORTH, SPACY]).T.tolist() if len(doc) else ([], [])
    return "".join(strings[orth] + " " if space else strings[orth] for orth, space in zip(orths, spaces))


def token_spans(doc: Doc) -> numpy.ndarray:
    """Each token's (start, end) characters in doc.text, int64 (n_tokens, 2); whitespace
    tokens get an empty span (0, 0). (Read with Doc.to_array: faster than a Token loop.)"""
    idx, length, is_space = doc.to_array([IDX, LENGTH, IS_SPACE]).astype("int64").T
    spans = numpy.stack([idx, idx + length], axis=1).reshape(len(doc), 2)
    spans[is_space == 1] = 0
    return spans


def token_means(chars: numpy.ndarray, spans: numpy.ndarray) -> numpy.ndarray:
    """Per (start, end) character span (a token), the mean of its characters' rows; an empty span (whitespace) zeros."""
    bounds = numpy.asarray(spans, dtype="int64").reshape(-1, 2)
    out = numpy.zeros((len(bounds), chars.shape[1]), dtype="float32")
    single = bounds[:, 1] - bounds[:, 0] == 1
    out[single] = chars[bounds[single, 0]]
    for i in numpy.flatnonzero(bounds[:, 1] - bounds[:, 0] > 1):
        out[i] = chars[bounds[i, 0] : bounds[i, 1]].mean(axis=0)
    return out


def token_means_backward(d_tokens: numpy.ndarray, spans: numpy.ndarray, n_chars: int) -> numpy.ndarray:
    """token_means' gradient: each token's row shared equally by its characters (n_chars, width)."""
    bounds = numpy.asarray(spans, dtype="int64").reshape(-1, 2)
    out = numpy.zeros((n_chars, d_tokens.shape[1]), dtype="float32")
    sizes = bounds[:, 1] - bounds[:, 0]
    single = sizes == 1
    out[bounds[single, 0]] += d_tokens[single]
    for i in numpy.flatnonzero(sizes > 1):
        out[bounds[i, 0] : bounds[i, 1]] += d_tokens[i] / sizes[i]
    return out


def _longest_first(words: List[Match], cap: int) -> List[Match]:
    """At most cap words, the longest (then earliest) kept, in text order."""
    if len(words) > cap:
        words = sorted(words, key=lambda m: (m[0] - m[1], m[0]))[:cap]
    return sorted(words)


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _keep(
    word: str,
    frequency: Optional[int],
    min_length: int,
    max_length: Optional[int],
    min_frequency: Optional[int],
    stats: LoadStats,
) -> bool:
    if len(word) < min_length:
        stats.too_short += 1
        return False
    if max_length is not None and len(word) > max_length:
        stats.too_long += 1
        return False
    if min_frequency is not None and frequency is not None and frequency < min_frequency:
        stats.too_rare += 1
        return False
    return True


@registry.misc("spacy-cner.lexicon.v1")
def make_lexicon(
    source: str = "jieba",
    format: str = "auto",
    min_word_length: int = 2,
    max_word_length: Optional[int] = None,
    min_frequency: Optional[int] = None,
    max_words: Optional[int] = None,
    encoding: str = "utf8",
    gazetteers: Sequence[str] = (),
) -> Lexicon:
    """A lexicon for the lexicon adapter or the soft lexicon, for [initialize.components.crf_ner.lexicon].

    Read at initialize only: the trained pipeline carries the lexicon (and its vectors).

    source (str): "jieba" (jieba's installed dictionary, offline) or the path of a word
        list ("word [frequency] [tag]" lines) or of word2vec text vectors ("count dim" first).
    format (str): "auto" (word2vec when the first line is "count dim"), "word_list" or "word2vec".
    min_word_length, max_word_length, min_frequency, max_words: as Lexicon.from_word_list
        (min_frequency needs a word list with frequencies).
    encoding (str): The file's encoding.
    gazetteers (Sequence[str]): Paths of typed word lists ("word<TAB>LABEL" lines, same
        encoding) added to the lexicon: new words are appended, and a word already there
        takes the gazetteer's label as its tag (a later gazetteer wins). Not with vectors.
    RETURNS (Lexicon): The lexicon; what loading left out is printed.
    """
    options = {"min_word_length": min_word_length, "max_word_length": max_word_length, "max_words": max_words}
    if format not in ("auto", "word_list", "word2vec"):
        raise ValueError(f"Unknown lexicon format {format!r}: use 'auto', 'word_list' or 'word2vec'.")
    if source == "jieba":
        if format == "word2vec":
            raise ValueError("The jieba lexicon is a word list, not word2vec vectors.")
        lexicon, stats = Lexicon.from_jieba(min_frequency=min_frequency, encoding=encoding, **options)
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"Lexicon file not found: {source} (give a word list, word2vec text vectors or 'jieba').")
        if format == "auto":
            format = "word2vec" if _is_word2vec_header(path, encoding) else "word_list"
        if format == "word2vec":
            if min_frequency is not None:
                raise ValueError(f"{source}: word2vec files have no frequencies; leave min_frequency unset.")
            lexicon, stats = Lexicon.from_word2vec(path, encoding=encoding, **options)
        else:
            lexicon, stats = Lexicon.from_word_list(path, min_frequency=min_frequency, encoding=encoding, **options)
    left_out = {
        "shorter than min_word_length": stats.too_short,
        "longer than max_word_length": stats.too_long,
        "below min_frequency": stats.too_rare,
        "duplicates": stats.duplicates,
        "over max_words": stats.over_max_words,
    }
    details = ", ".join(f"{count:,} {reason}" for reason, count in left_out.items() if count)
    vectors = "" if lexicon.vectors is None else f" with {lexicon.vectors.shape[1]}-d vectors"
    msg.info(f"Lexicon {stats.path}: {len(lexicon):,} words{vectors}" + (f"; left out {details}" if details else ""))
    for gazetteer in gazetteers:
        lexicon = _add_gazetteer(lexicon, Path(gazetteer), min_word_length, max_word_length, encoding)
    return lexicon


def _add_gazetteer(
    lexicon: Lexicon, path: Path, min_word_length: int, max_word_length: Optional[int], encoding: str
) -> Lexicon:
    """The lexicon with a gazetteer's words added and their labels as tags (see make_lexicon)."""
    if lexicon.vectors is not None:
        raise ValueError(
            f"Gazetteer {path}: the lexicon has word vectors and the gazetteer's words have none. Use "
            "gazetteers with a word list or jieba's dictionary, or add the words to the vectors file."
        )
    if not path.is_file():
        raise ValueError(f"Gazetteer file not found: {path} (give 'word<TAB>LABEL' lines).")
    gazetteer, stats = Lexicon.from_word_list(
        path, min_word_length=min_word_length, max_word_length=max_word_length, encoding=encoding
    )
    untyped = [word for word, tag in zip(gazetteer.words, gazetteer.tags or [""] * len(gazetteer)) if not tag]
    if untyped:
        raise ValueError(
            f"Gazetteer {path}: {len(untyped)} words without a label, e.g. {untyped[0]!r}: write 'word<TAB>LABEL'."
        )
    pos_like = sorted({tag for tag in gazetteer.tags if entity_type(tag) != tag})
    if pos_like:
        raise ValueError(
            f"Gazetteer {path}: labels {pos_like} read as part-of-speech tags (lower-case ASCII letters, "
            "as jieba's n, nr, ns): write labels such as PER, LOC or BRAND."
        )
    words = list(lexicon.words)
    tags = list(lexicon.tags or [""] * len(words))
    frequencies = None if lexicon.frequencies is None else list(lexicon.frequencies)
    n_new = 0
    for word, tag in zip(gazetteer.words, gazetteer.tags):
        i = lexicon.index.get(word)
        if i is None:
            words.append(word)
            tags.append(tag)
            if frequencies is not None:
                frequencies.append(0)  # unknown: the least weight in the soft lexicon
            n_new += 1
        else:
            tags[i] = tag
    msg.info(f"Gazetteer {path}: {len(gazetteer):,} words, {n_new:,} new, labels {sorted(set(gazetteer.tags))}")
    return Lexicon(words, frequencies=frequencies, tags=tags)


def _is_word2vec_header(path: Path, encoding: str) -> bool:
    with open(path, encoding=encoding) as file_:
        fields = file_.readline().lstrip("\ufeff").split()
    return len(fields) == 2 and all(_is_int(value) for value in fields)
