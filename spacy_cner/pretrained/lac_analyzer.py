"""LAC's two modes on text, as LAC 2.1.2's own code runs them (LAC/models.py, reader.py, segment.py), over
the torch networks of lac_net.py: no paddle, no code of the package.

- `seg` (LacSegmenter): the character BiGRU-CRF of seg_model; one id per character (after q2b.dic, else
  OOV), tags -B/-I/-E/-S, a word starts at a tag ending in B or S.
- `lac` (LacTagger): first a dictionary segmenter (DictionarySegmenter, segment.py over small_seg.dic; not
  the seg_model network) cuts the text; each of its words that is in word.dic is one id, any other word one
  id per character (q2b.dic, then word.dic, else OOV). The tagger's tag of a word id is spread over its
  characters (X-B then X-I ...), and words are read off the character tags: a word starts at a tag ending
  in B (the O tag continues the word before it, as in LAC) and takes the tag of its last character
  (words_and_tags). The pipelines read them with read_words, which departs from LAC where its reading glues
  text into words with an empty tag (see there).
"""

import bisect
import re
import unicodedata
from dataclasses import dataclass
from math import log
from typing import Dict, List, Optional, Sequence, Tuple

import numpy
import torch

from ..long_docs import SENTENCE_ENDS, Window, split_windows
from .lac import SEGMENTER, TAGGER, LacFiles
from .lac_net import LacNetwork, viterbi_decode
from .lac_probabilities import EntityIds, entity_probabilities

# segment.py: single ASCII letters and digits the dictionary cut leaves alone are glued back together.
ASCII_ALNUM = re.compile("[a-zA-Z0-9]")
ASCII_ALNUM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# The tagger's entity tags (tag.dic gives them the ids of these POS tags).
ENTITY_POS = {"PER": "nr", "LOC": "ns", "ORG": "nt", "TIME": "t"}
# One run of the network reads at most GROUP_SIZE windows and GROUP_IDS ids, padding included, and at most
# GROUP_PADDING times the ids it needs: the network's time grows with the padded ids (a group of up to 256 windows
# with no padding rule was slower on MSRA's sentences than groups of 64), far more than with the groups' steps.
GROUP_SIZE = 256
GROUP_IDS = 16384
GROUP_PADDING = 1.25
# The most words LacTagger.ids keeps the ids of (a text's words repeat: dictionary words and characters).
WORD_CACHE = 200_000
# read_words' tags where LAC has none: a whitespace word (spaCy's tag for it), a symbol (LAC's punctuation tag),
# other text LAC tagged O (jieba's and ICTCLAS's tag for a string outside their analysis).
SPACE_TAG, SYMBOL_TAG, OTHER_TAG = "_SP", "w", "x"
# Pictographs and emoji (U+2300-23FF technical symbols as in ⌚, U+2600-27BF symbols and dingbats, U+2B00-2BFF
# arrows and stars, U+1F000-1FAFF the emoji planes' blocks): never inside a word with other characters.
PICTOGRAPHS = ((0x2300, 0x23FF), (0x2600, 0x27BF), (0x2B00, 0x2BFF), (0x1F000, 0x1FAFF))
# What joins the character before it into one grapheme (an emoji sequence): the zero-width joiner, variation
# selectors, the keycap mark, skin tones, tag characters.
JOINERS = ((0x200D, 0x200D), (0xFE00, 0xFE0F), (0x20E3, 0x20E3), (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F))
REGIONAL_INDICATORS = (0x1F1E6, 0x1F1FF)


class DictionarySegmenter:
    """LAC's segment.py `Segment.fast_cut`: the best path through the DAG of dictionary words.

    LAC scores a word by log(len(word)) - log(total count) (its prefix tree keeps each word's length where
    the count would be), a character outside the dictionary by log(1) - log(total); ties go to the longer
    word. Reproduced as is: this cut chooses the tagger's ids.

    words (Sequence[str]): small_seg.dic's words.
    total_count (int): The sum of small_seg.dic's counts.
    """

    def __init__(self, words: Sequence[str], total_count: int):
        self.words = list(words)
        self.total_count = total_count
        self.log_total = log(total_count)
        self.tree: Dict[str, Optional[int]] = {}
        for word in self.words:  # prefix_tree.py TriedTree.add_word
            self.tree[word] = len(word)
            for end in range(1, len(word)):
                self.tree[word[:end]] = self.tree.get(word[:end], None)
        # log(len(word)) - log(total) by length, the first two terms of each candidate's score.
        longest = max((len(word) for word in self.words), default=0)
        self.length_scores = [0.0] + [log(length) - self.log_total for length in range(1, longest + 1)]

    def __call__(self, text: str) -> List[str]:
        # fast_cut's DAG and route, the same floats in the same order, without its dicts of lists: the best
        # (score, last) of each start, from the end; ties to the larger last (the longer word), as max() of
        # the (score, last) tuples does. A text's cut was a tenth of LacFeatures' time at prediction.
        length = len(text)
        tree_get = self.tree.get
        log_total = self.log_total
        length_scores = self.length_scores
        score_after = [0.0] * (length + 1)
        best_end = [0] * (length + 1)
        alone = log(1) - log_total  # a character alone, whether or not it is a dictionary word
        for start in range(length - 1, -1, -1):
            best_score = alone + score_after[start + 1]
            best_last = start
            end = start + 1
            prefix = tree_get(text[start:end], -1)
            while prefix != -1:  # -1: not a prefix of a word; None: a prefix, not a word; else the word's length
                if prefix:
                    score = length_scores[prefix] + score_after[end]  # log(prefix) - log_total + ...
                    if score > best_score or (score == best_score and end - 1 > best_last):
                        best_score, best_last = score, end - 1
                end += 1
                prefix = tree_get(text[start:end], -1) if end <= length else -1
            score_after[start] = best_score
            best_end[start] = best_last + 1
        words: List[str] = []
        buffer = ""
        start = 0
        while start < length:
            end = best_end[start]
            word = text[start:end]
            if len(word) == 1 and word in ASCII_ALNUM_CHARS:
                buffer += word
            else:
                if buffer:
                    words.append(buffer)
                    buffer = ""
                words.append(word)
            start = end
        if buffer:
            words.append(buffer)
        return words


@dataclass
class Lexicon:
    """A model's conf: word.dic (by id), q2b.dic and tag.dic (by id)."""

    vocabulary: List[str]
    replacements: Dict[str, str]
    tags: List[str]

    def __post_init__(self):
        # reader.py load_kv_dict(reverse=True): a later line wins (word.dic 2.1.2 repeats no token).
        self.ids = {token: ident for ident, token in enumerate(self.vocabulary)}
        self.oov = self.ids["OOV"]

    def id_of(self, word: str) -> int:
        """reader.py word_to_ids for one word (or character)."""
        return self.ids.get(self.replacements.get(word, word), self.oov)


class LacSegmenter:
    """LAC's `seg` mode: the character BiGRU-CRF segmenter."""

    def __init__(self, network: LacNetwork, lexicon: Lexicon):
        self.network = network
        self.lexicon = lexicon

    def __call__(self, texts: Sequence[str]) -> List[List[str]]:
        """The words of each text ([] for an empty text)."""
        sequences = [[self.lexicon.id_of(char) for char in text] for text in texts]
        words_of = []
        for text, path in zip(texts, self.network.decode(sequences)):
            words: List[str] = []
            for char, ident in zip(text, path):
                tag = self.lexicon.tags[ident]
                if not words or tag.endswith("B") or tag.endswith("S"):
                    words.append(char)
                else:
                    words[-1] += char
            words_of.append(words)
        return words_of


class LacTagger:
    """LAC's `lac` mode: words and their POS / entity tags."""

    def __init__(self, network: LacNetwork, lexicon: Lexicon, segmenter: DictionarySegmenter):
        self.network = network
        self.lexicon = lexicon
        self.segmenter = segmenter

    def ids(self, text: str) -> Tuple[List[int], List[int]]:
        """reader.py text_to_ids over the dictionary cut: the ids and the characters each covers (each word's
        kept, up to WORD_CACHE words)."""
        ids: List[int] = []
        lengths: List[int] = []
        cache = self.__dict__.setdefault("_word_ids", {})
        for word in self.segmenter(text):
            found = cache.get(word)
            if found is None:
                if word in self.lexicon.ids:
                    found = ([self.lexicon.id_of(word)], [len(word)])
                else:
                    found = ([self.lexicon.id_of(char) for char in word], [1] * len(word))
                if len(cache) < WORD_CACHE:
                    cache[word] = found
            ids.extend(found[0])
            lengths.extend(found[1])
        return ids, lengths

    def char_tags(self, texts: Sequence[str]) -> List[List[str]]:
        """Each text's tag per character (e.g. PER-B, PER-I, n-B ..., O), as LAC's parse_result spreads them."""
        return [self.tag_set.char_tags(*tagged) for tagged in self._tag(texts, keep_emissions=False)[0]]

    @property
    def tag_set(self) -> "LacTagSet":
        if getattr(self, "_tag_set", None) is None or self._tag_set.tags is not self.lexicon.tags:
            self._tag_set = LacTagSet(self.lexicon.tags)
        return self._tag_set

    def _tag(self, texts: Sequence[str], keep_emissions: bool):
        """Per text, (each character's tag id: its id's, whether it is its id's first character); the
        characters each id covers; if keep_emissions, each text's emission scores (else None)."""
        prepared = [self.ids(text) for text in texts]
        sequences = [ids for ids, _ in prepared]
        if keep_emissions and any(sequences):
            lengths = [len(ids) for ids in sequences]
            padded = torch.zeros(len(sequences), max(lengths), dtype=torch.long)
            for row, ids in enumerate(sequences):
                padded[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            length_tensor = torch.as_tensor(lengths, dtype=torch.long)
            with torch.no_grad():
                scores = self.network(padded, length_tensor)
                paths = viterbi_decode(scores, self.network.crf_weights, length_tensor)
            emissions: Optional[List[numpy.ndarray]] = [scores[row, :n].numpy() for row, n in enumerate(lengths)]
        else:
            paths = self.network.decode(sequences)
            emissions = None
        tagged = []
        id_lengths = []
        for (_, lengths), path in zip(prepared, paths):
            counts = numpy.asarray(lengths, dtype="int64")
            starts = numpy.zeros(int(counts.sum()), dtype=bool)
            starts[numpy.cumsum(counts) - counts] = True
            tagged.append((numpy.repeat(numpy.asarray(path, dtype="int64"), counts), starts))
            id_lengths.append(lengths)
        return tagged, id_lengths, emissions

    def __call__(self, texts: Sequence[str]) -> List[Tuple[List[str], List[str]]]:
        """(words, tags) of each text, as LAC.run in lac mode (([], []) for an empty text)."""
        return [words_and_tags(text, tags) for text, tags in zip(texts, self.char_tags(texts))]

    def windowed_char_tags(self, texts: Sequence[str], window_size: int) -> List[List[str]]:
        """char_tags of each text read in windows (text_windows: each sentence alone, a sentence longer than
        window_size characters in overlapping windows), the windows of all texts run together in length groups,
        so a text gets the same tags alone and among others."""
        return self.windowed_analysis(texts, window_size).char_tags

    def windowed_analysis(self, texts: Sequence[str], window_size: int, scores: bool = False) -> "LacAnalysis":
        """windowed_char_tags as arrays (LacAnalysis), and (scores) what LacAnalysis.entity_probabilities needs."""
        pieces = [(index, window) for index, text in enumerate(texts) for window in text_windows(text, window_size)]
        piece_texts = [texts[index][window.start : window.end] for index, window in pieces]
        empty = (numpy.zeros(0, dtype="int64"), numpy.zeros(0, dtype=bool))
        piece_tagged: List[Tuple[numpy.ndarray, numpy.ndarray]] = [empty for _ in pieces]
        piece_lengths: List[List[int]] = [[] for _ in pieces]
        piece_emissions: List[numpy.ndarray] = [numpy.zeros((0, 0), dtype="float32") for _ in pieces]
        for group in length_groups([len(text) for text in piece_texts]):
            tagged, lengths, emissions = self._tag([piece_texts[p] for p in group], keep_emissions=scores)
            for offset, position in enumerate(group):
                piece_tagged[position], piece_lengths[position] = tagged[offset], lengths[offset]
                if emissions is not None:
                    piece_emissions[position] = emissions[offset]
        parts: List[List[Tuple[numpy.ndarray, numpy.ndarray]]] = [[] for _ in texts]
        for (index, window), (tag_ids, starts) in zip(pieces, piece_tagged):
            own = slice(window.own_start - window.start, window.own_end - window.start)
            parts[index].append((tag_ids[own], starts[own]))
        tagged_texts = [
            (numpy.concatenate([p[0] for p in part]), numpy.concatenate([p[1] for p in part])) if part else empty
            for part in parts
        ]
        return LacAnalysis(
            self, list(texts), tagged_texts, pieces, piece_tagged, piece_lengths, piece_emissions if scores else None
        )


class LacTagSet:
    """What read_words needs of each of LAC's tags, by tag id: its label (tag less -B / -I; "" for O), whether
    it starts a word at an id's first character (B, S, O), whether it is O; and the character tags' strings."""

    def __init__(self, tags: Sequence[str]):
        self.tags = tags
        self.labels = [tag[:-2] for tag in tags]
        self.inside = [tag[:-2] + "-I" for tag in tags]
        self.is_untagged = numpy.asarray([tag == "O" for tag in tags], dtype=bool)
        self.starts = numpy.asarray([_starts_word(tag) for tag in tags], dtype=bool)
        self.index = {tag: ident for ident, tag in enumerate(tags)}

    def char_tags(self, tag_ids: numpy.ndarray, first: numpy.ndarray) -> List[str]:
        """The characters' tags as LacTagger.char_tags gives them (an id's tag, then its -I form)."""
        tags, inside = self.tags, self.inside
        return [tags[t] if f else inside[t] for t, f in zip(tag_ids.tolist(), first.tolist())]


@dataclass
class LacAnalysis:
    """What LacTagger.windowed_analysis read from a batch of texts: each text's characters' tag ids (their id's)
    and first-of-id flags and, for the entities' probabilities, the windows, each window's tagged characters,
    the characters of each id and its emission scores."""

    tagger: LacTagger
    texts: List[str]
    tagged: List[Tuple[numpy.ndarray, numpy.ndarray]]
    pieces: List[Tuple[int, Window]]
    piece_tagged: List[Tuple[numpy.ndarray, numpy.ndarray]]
    piece_lengths: List[List[int]]
    emissions: Optional[List[numpy.ndarray]]

    @property
    def char_tags(self) -> List[List[str]]:
        """Each text's tag per character (LacTagger.char_tags)."""
        return [self.tagger.tag_set.char_tags(*tagged) for tagged in self.tagged]

    def words(self) -> List[Tuple[List[str], List[str]]]:
        """read_words of each text."""
        tag_set = self.tagger.tag_set
        return [read_tagged_words(text, *tagged, tag_set) for text, tagged in zip(self.texts, self.tagged)]

    def entity_probabilities(self, spans: Sequence[Sequence[Tuple[int, int, str]]]) -> List[List[float]]:
        """The probability under LAC's CRF of each entity (start char, end char, label; PER, LOC, ORG or TIME)
        of each text (lac_probabilities.py): in the window owning its first character, in the ids holding its
        characters, a side read_words cut from a longer word of LAC's left open. The windows run in length
        groups (length_groups)."""
        if self.emissions is None:
            raise ValueError("No emission scores kept: call windowed_analysis with scores=True.")
        tag_ids = self.tagger.tag_set.index
        by_text: Dict[int, List[int]] = {}  # each text's windows, in order
        for position, (index, _) in enumerate(self.pieces):
            by_text.setdefault(index, []).append(position)
        own_starts = {index: [self.pieces[p][1].own_start for p in positions] for index, positions in by_text.items()}
        id_ends: Dict[int, numpy.ndarray] = {}
        entities: List[EntityIds] = []
        for index, text_spans in enumerate(spans):
            for start, end, label in text_spans:
                position = by_text[index][bisect.bisect_right(own_starts[index], start) - 1]
                window = self.pieces[position][1]
                piece_tags, piece_first = self.piece_tagged[position]
                if position not in id_ends:
                    id_ends[position] = numpy.cumsum(self.piece_lengths[position])
                ends = id_ends[position]
                local_start, local_end = start - window.start, min(end, window.end) - window.start
                first = int(numpy.searchsorted(ends, local_start, side="right"))
                last = int(numpy.searchsorted(ends, local_end - 1, side="right"))
                begin_tag, inside_tag = tag_ids[f"{label}-B"], tag_ids[f"{label}-I"]

                def inside_at(char: int) -> bool:  # the character's tag is L-I (an id's own, or spread)
                    tag = int(piece_tags[char])
                    return tag == inside_tag or (tag == begin_tag and not piece_first[char])

                open_start = inside_at(local_start) or (first > 0 and ends[first - 1] != local_start)
                open_end = (
                    end > window.end
                    or ends[last] != local_end
                    or (local_end < len(piece_tags) and inside_at(local_end))
                )
                entities.append(EntityIds(position, first, last, begin_tag, inside_tag, open_start, open_end))
        probabilities = [0.0] * len(entities)
        crf_weights = self.tagger.network.crf_weights.numpy()
        used = sorted({entity.piece for entity in entities})
        for group in length_groups([len(self.emissions[piece]) for piece in used]):
            pieces = {used[g] for g in group}
            chosen = [i for i, entity in enumerate(entities) if entity.piece in pieces]
            found = entity_probabilities(self.emissions, crf_weights, [entities[i] for i in chosen])
            for i, probability in zip(chosen, found):
                probabilities[i] = probability
        out: List[List[float]] = []
        for text_spans in spans:
            out.append(probabilities[: len(text_spans)])
            probabilities = probabilities[len(text_spans) :]
        return out


def words_and_tags(text: str, char_tags: Sequence[str]) -> Tuple[List[str], List[str]]:
    """LAC's words and word tags read off its character tags: a word starts at a tag ending in B (or S), the O
    tag continues the word before it, and a word takes the tag of its last character (models.py)."""
    words: List[str] = []
    word_tags: List[str] = []
    for char, tag in zip(text, char_tags):
        if not words or tag.endswith("B") or tag.endswith("S"):
            words.append(char)
            word_tags.append(tag[:-2])
        else:
            words[-1] += char
            word_tags[-1] = tag[:-2]
    return words, word_tags


def read_words(text: str, char_tags: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The pipelines' words and word tags off LAC's character tags: words_and_tags (LAC's reading), except
    where it glues text into one word with no tag or puts a line break or an emoji inside an entity:

    - an O tag starts a word (in LAC it continues the word before it, which then takes O's empty tag: `3小时 #周末#
      @`): each id LAC's network left untagged is a word of its own (the dictionary cut's word, or a character),
      split again at its punctuation and symbols, and tagged `x` (`w` if all punctuation or symbols);
    - whitespace is a word of its own, tagged `_SP` (a run of it one word), but for a single space between two
      characters LAC reads as one word (`Hong Kong`); a word it cuts goes on as a new word after it;
    - an emoji or pictograph (with the joiners and modifiers of its sequence), a control, format, private-use
      or unassigned character, U+FFFD, is a word of its own tagged `w`: an entity LAC read across one
      (`北京😊天安门`) is two entities.
    A word takes the tag of its last character, as in LAC; an entity is a word tagged PER, LOC, ORG or TIME.

    text (str): The text LAC read.
    char_tags (Sequence[str]): LAC's tag of each character (LacTagger.char_tags).
    RETURNS (Tuple[List[str], List[str]]): The words, joining to text, and their tags.
    """
    words: List[str] = []
    word_tags: List[str] = []
    kinds: List[str] = []  # per word: "text", "untagged" (O), "space" or "apart"
    length = len(text)
    previous = ""
    for position, (char, tag) in enumerate(zip(text, char_tags)):
        kind = _char_kind(char)
        untagged = tag == "O" or tag == "-I"  # "-I": the rest of an id tagged O (LacTagger.char_tags)
        last_kind = kinds[-1] if kinds else None
        joiner = kind == "joiner"
        if kind == "space":
            inside = (
                char == " "
                and last_kind == "text"
                and not previous.isspace()
                and not untagged
                and not _starts_word(tag)
                and position + 1 < length
                and _char_kind(text[position + 1]) == "text"
                and not _starts_word(char_tags[position + 1])
                and char_tags[position + 1] not in ("O", "-I")
            )
            joins = last_kind == "space" or inside
            kind = "text" if inside else "space"
        elif kind == "joiner":
            joins = bool(words)
            kind = last_kind or "apart"
        elif kind == "apart":
            joins = previous == "\u200d" or (_regional(char) and _regional(previous) and len(words[-1]) == 1)
        elif untagged:
            kind = "untagged"
            symbol = unicodedata.category(char)[0] in "PS"
            joins = (
                tag == "-I" and last_kind == "untagged" and not symbol and unicodedata.category(previous)[0] not in "PS"
            )
        else:
            joins = last_kind == "text" and not _starts_word(tag)
        if joins and words:
            words[-1] += char
            if kind == "text" and kinds[-1] == "text" and not joiner:
                word_tags[-1] = tag[:-2]
        else:
            words.append(char)
            word_tags.append(tag[:-2] if kind == "text" else "")
            kinds.append(kind)
        previous = char
    for index, (word, kind) in enumerate(zip(words, kinds)):
        if kind == "space":
            word_tags[index] = SPACE_TAG
        elif kind == "apart" or (kind == "untagged" and all(unicodedata.category(c)[0] in "PS" for c in word)):
            word_tags[index] = SYMBOL_TAG
        elif kind == "untagged":
            word_tags[index] = OTHER_TAG
    return words, word_tags


def read_tagged_words(
    text: str, tag_ids: numpy.ndarray, first: numpy.ndarray, tag_set: "LacTagSet"
) -> Tuple[List[str], List[str]]:
    """read_words over LAC's character tags as arrays (each character's id's tag id, whether it is the id's first
    character), vectorised: the same words and tags. A text holding a character read_words keeps apart or a
    joiner (an emoji, a control character) goes through read_words itself."""
    if not text:
        return [], []
    codes = numpy.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    kinds, punctuation = _char_tables()
    wide = codes >= len(kinds)
    if wide.any():
        kind = numpy.zeros(len(codes), dtype="uint8")
        narrow = ~wide
        kind[narrow] = kinds[codes[narrow]]
        kind[wide] = [_KIND_CODES[_char_kind(text[i])] for i in numpy.flatnonzero(wide).tolist()]
        symbol = numpy.zeros(len(codes), dtype=bool)
        symbol[narrow] = punctuation[codes[narrow]]
        symbol[wide] = [unicodedata.category(text[i])[0] in "PS" for i in numpy.flatnonzero(wide).tolist()]
    else:
        kind, symbol = kinds[codes], punctuation[codes]
    if (kind > _SPACE).any():  # a joiner or a character kept apart: the reference reading
        return read_words(text, tag_set.char_tags(tag_ids, first))
    space = kind == _SPACE
    untagged = tag_set.is_untagged[tag_ids]
    starts = first & tag_set.starts[tag_ids]
    tagged_text = ~space & ~untagged
    # A single space between two characters LAC reads as one word stays inside it (read_words).
    inside = numpy.zeros(len(codes), dtype=bool)
    inside[1:-1] = (
        (codes[1:-1] == 32) & tagged_text[:-2] & ~untagged[1:-1] & ~starts[1:-1] & tagged_text[2:] & ~starts[2:]
    )
    # Each character's kind in its word: 0 text, 1 whitespace, 2 untagged text.
    word_kind = numpy.where(space & ~inside, 1, numpy.where(untagged & ~space, 2, 0))
    before = word_kind[:-1]
    joins = numpy.zeros(len(codes), dtype=bool)
    joins[1:] = (
        (space[1:] & ((before == 1) | inside[1:]))
        | (untagged[1:] & ~space[1:] & ~first[1:] & (before == 2) & ~symbol[1:] & ~symbol[:-1])
        | (tagged_text[1:] & (before == 0) & ~starts[1:])
    )
    word_starts = numpy.flatnonzero(~joins)
    word_ends = numpy.append(word_starts[1:], len(codes))
    starts_list, ends_list = word_starts.tolist(), word_ends.tolist()
    words = [text[a:b] for a, b in zip(starts_list, ends_list)]
    all_symbols = numpy.logical_and.reduceat(symbol, word_starts)
    labels = tag_set.labels
    last_tags = tag_ids[word_ends - 1].tolist()
    tags = [
        labels[tag] if kind_of == 0 else SPACE_TAG if kind_of == 1 else SYMBOL_TAG if symbols else OTHER_TAG
        for kind_of, tag, symbols in zip(word_kind[word_starts].tolist(), last_tags, all_symbols.tolist())
    ]
    return words, tags


# _char_kind's kinds as read_tagged_words' codes (a joiner or "apart" sends a text to read_words).
_TEXT, _SPACE, _JOINER, _APART = 0, 1, 2, 3
_KIND_CODES = {"text": _TEXT, "space": _SPACE, "joiner": _JOINER, "apart": _APART}
_TABLES: List[numpy.ndarray] = []


def _char_tables() -> Tuple[numpy.ndarray, numpy.ndarray]:
    """_char_kind's code, and whether the category is punctuation or a symbol, of every BMP character (built once:
    a few tens of milliseconds)."""
    if not _TABLES:
        chars = [chr(code) for code in range(0x10000)]
        _TABLES.append(numpy.asarray([_KIND_CODES[_char_kind(char)] for char in chars], dtype="uint8"))
        _TABLES.append(numpy.asarray([unicodedata.category(char)[0] in "PS" for char in chars], dtype=bool))
    return _TABLES[0], _TABLES[1]


def _starts_word(tag: str) -> bool:
    """Whether LAC starts a word at this character tag (B or S; O starts one in read_words)."""
    return tag.endswith("B") or tag.endswith("S") or tag == "O"


def _in(code: int, ranges) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _regional(char: str) -> bool:
    return bool(char) and REGIONAL_INDICATORS[0] <= ord(char) <= REGIONAL_INDICATORS[1]


def _char_kind(char: str) -> str:
    """ "space", "joiner" (JOINERS), "apart" (what read_words keeps out of other words) or "text"."""
    if char.isspace():
        return "space"
    code = ord(char)
    if _in(code, JOINERS):
        return "joiner"
    if _in(code, PICTOGRAPHS) or char == "\ufffd" or unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn", "Cs"):
        return "apart"
    return "text"


def text_windows(text: str, window_size: int, every_sentence: bool = True) -> List[Window]:
    """long_docs.split_windows over the text's characters, cut after each one of SENTENCE_ENDS."""
    if not text:
        return []
    ends = [index + 1 for index, char in enumerate(text) if char in SENTENCE_ENDS]
    return split_windows(ends, len(text), window_size, every_sentence=every_sentence)


def length_groups(lengths: Sequence[int]) -> List[List[int]]:
    """Indices of the non-empty sequences, sorted by length, in groups of at most GROUP_SIZE whose padded size
    (count x longest) is at most GROUP_IDS (a longer sequence alone) and GROUP_PADDING times their own ids."""
    groups: List[List[int]] = []
    own = 0
    for index in sorted((i for i, length in enumerate(lengths) if length), key=lambda i: lengths[i]):
        group = groups[-1] if groups else None
        padded = (len(group) + 1) * lengths[index] if group is not None else 0
        if (
            group is not None
            and len(group) < GROUP_SIZE
            and padded <= GROUP_IDS
            and padded <= GROUP_PADDING * (own + lengths[index])
        ):
            group.append(index)
            own += lengths[index]
        else:
            groups.append([index])
            own = lengths[index]
    return groups


def tagger_from_sdist(lac: LacFiles) -> LacTagger:
    """LAC's `lac` mode from the checked sdist's lac_model files."""
    lexicon = Lexicon(lac.model_vocabulary(TAGGER), lac.model_replacements(TAGGER), lac.tags(TAGGER))
    return LacTagger(
        LacNetwork.from_paddle(lac.network(TAGGER)), lexicon, DictionarySegmenter(*lac.segment_dictionary())
    )


def segmenter_from_sdist(lac: LacFiles) -> LacSegmenter:
    """LAC's `seg` mode from the checked sdist's seg_model files."""
    lexicon = Lexicon(lac.model_vocabulary(SEGMENTER), lac.model_replacements(SEGMENTER), lac.tags(SEGMENTER))
    return LacSegmenter(LacNetwork.from_paddle(lac.network(SEGMENTER)), lexicon)
