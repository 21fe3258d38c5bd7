"""LAC's two modes on text, as LAC 2.1.2's own code runs them (LAC/models.py, reader.py, segment.py), over
the torch networks of lac_net.py: no paddle, no code of the package.

- `seg` (LacSegmenter): the character BiGRU-CRF of seg_model; one id per character (after q2b.dic, else
  OOV), tags -B/-I/-E/-S, a word starts at a tag ending in B or S.
- `lac` (LacTagger): first a dictionary segmenter (DictionarySegmenter, segment.py over small_seg.dic; not
  the seg_model network) cuts the text; each of its words that is in word.dic is one id, any other word one
  id per character (q2b.dic, then word.dic, else OOV). The tagger's tag of a word id is spread over its
  characters (X-B then X-I ...), and words are read off the character tags: a word starts at a tag ending
  in B (the O tag continues the word before it, as in LAC) and takes the tag of its last character.
"""
import re
from dataclasses import dataclass
from math import log
from typing import Dict, List, Optional, Sequence, Tuple

from .lac import SEGMENTER, TAGGER, LacFiles
from .lac_net import LacNetwork

# segment.py: single ASCII letters and digits the dictionary cut leaves alone are glued back together.
ASCII_ALNUM = re.compile("[a-zA-Z0-9]")
# The tagger's entity tags (tag.dic gives them the ids of these POS tags).
ENTITY_POS = {"PER": "nr", "LOC": "ns", "ORG": "nt", "TIME": "t"}


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

    def __call__(self, text: str) -> List[str]:
        length = len(text)
        dag: Dict[int, List[int]] = {start: [start] for start in range(length)}
        for start in range(length):
            end = start + 1
            word = text[start:end]
            while end <= length and word in self.tree:
                if self.tree[word]:
                    dag[start].append(end - 1)
                end += 1
                word = text[start:end]
        route: Dict[int, Tuple[float, int]] = {length: (0.0, 0)}
        for start in range(length - 1, -1, -1):
            route[start] = max(
                (log(self.tree.get(text[start : last + 1]) or 1) - self.log_total + route[last + 1][0], last)
                for last in dag[start]
            )
        words: List[str] = []
        buffer = ""
        start = 0
        while start < length:
            end = route[start][1] + 1
            word = text[start:end]
            if ASCII_ALNUM.match(word) and len(word) == 1:
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
        """reader.py text_to_ids over the dictionary cut: the ids and the characters each covers."""
        ids: List[int] = []
        lengths: List[int] = []
        for word in self.segmenter(text):
            if word in self.lexicon.ids:
                ids.append(self.lexicon.id_of(word))
                lengths.append(len(word))
            else:
                ids.extend(self.lexicon.id_of(char) for char in word)
                lengths.extend([1] * len(word))
        return ids, lengths

    def char_tags(self, texts: Sequence[str]) -> List[List[str]]:
        """Each text's tag per character (e.g. PER-B, PER-I, n-B ..., O), as LAC's parse_result spreads them."""
        prepared = [self.ids(text) for text in texts]
        paths = self.network.decode([ids for ids, _ in prepared])
        tags_of = []
        for (_, lengths), path in zip(prepared, paths):
            tags: List[str] = []
            for ident, length in zip(path, lengths):
                tag = self.lexicon.tags[ident]
                tags.append(tag)
                tags.extend([tag[:-2] + "-I"] * (length - 1))
            tags_of.append(tags)
        return tags_of

    def __call__(self, texts: Sequence[str]) -> List[Tuple[List[str], List[str]]]:
        """(words, tags) of each text, as LAC.run in lac mode (([], []) for an empty text)."""
        results = []
        for text, tags in zip(texts, self.char_tags(texts)):
            words: List[str] = []
            word_tags: List[str] = []
            for char, tag in zip(text, tags):
                if not words or tag.endswith("B") or tag.endswith("S"):
                    words.append(char)
                    word_tags.append(tag[:-2])
                else:
                    words[-1] += char
                    word_tags[-1] = tag[:-2]  # the last character's tag (models.py)
            results.append((words, word_tags))
        return results


def tagger_from_sdist(lac: LacFiles) -> LacTagger:
    """LAC's `lac` mode from the checked sdist's lac_model files."""
    lexicon = Lexicon(lac.model_vocabulary(TAGGER), lac.model_replacements(TAGGER), lac.tags(TAGGER))
    return LacTagger(LacNetwork.from_paddle(lac.network(TAGGER)), lexicon, DictionarySegmenter(*lac.segment_dictionary()))


def segmenter_from_sdist(lac: LacFiles) -> LacSegmenter:
    """LAC's `seg` mode from the checked sdist's seg_model files."""
    lexicon = Lexicon(lac.model_vocabulary(SEGMENTER), lac.model_replacements(SEGMENTER), lac.tags(SEGMENTER))
    return LacSegmenter(LacNetwork.from_paddle(lac.network(SEGMENTER)), lexicon)
