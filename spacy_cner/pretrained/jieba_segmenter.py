"""jieba's word segmentation, on rjieba (jieba's Rust port) where the two give the same words.

SoftLexicon's softword feature is each character's position in jieba's segmentation; jieba's
Python segmenter took a large share of the default pipeline's inference, and loading its
dictionary takes about a second. rjieba segments the same text many times faster
(BENCHMARKS.md#inference) and gives exactly jieba's words (HMM on), but in two places:
- runs of letters and digits joined by one of + # & . _ % - ("2013.11.18", "kfr-35gw"): rjieba
  keeps such a run whole, jieba's HMM step splits it with its pattern for non-Han text
  (jieba.finalseg.re_skip: "2013.11", ".", "18"). Such a word of rjieba's (no Han character in it,
  not one of the dictionary's words that hold a joiner, DICTIONARY_JOINED) is split here by that
  same pattern;
- runs of rare Han characters outside jieba's Han block ("㐀㐀": rjieba makes one word, jieba two).
  jieba segments each of its blocks (a run of its Han characters, letters, digits and those joiners,
  or a run of anything else) on its own, so a block holding one of those characters goes to jieba.
On every file of ../shared/data (85,432 sentences) and on random text the words are then jieba's
(tests/pretrained/test_jieba_segmenter.py), and jieba's dictionary is loaded only for text with a rare Han character.
Without rjieba (a requirement, but one a platform may lack), and when jieba's dictionary was changed
in this process (jieba.load_userdict, jieba.add_word, jieba.set_dictionary: rjieba would not see it),
every text goes to jieba.
"""

import logging
import re
from pathlib import Path
from typing import List, Optional

# The Han characters outside jieba's U+4E00-U+9FD5 that rjieba's Han blocks hold (CJK Extension A,
# U+9FD6-U+9FFF, the compatibility ideographs, Extensions B-F and their supplement): jieba splits a run of
# those into single characters, rjieba segments it as words, so a block holding one goes to jieba.
JIEBA_ONLY = re.compile("[\u3400-\u4dbf\u9fd6-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# The joiners of jieba's Han-and-alphanumeric blocks (jieba.re_han_default), its Han block, its HMM
# step's pattern for the text between Han runs (jieba.finalseg.re_skip), and the words of jieba's
# dictionary that hold a joiner (tests/pretrained/test_jieba_segmenter.py reads them from its dict.txt): rjieba keeps a
# run like "kfr-35gw" whole where jieba splits it by JIEBA_SKIP.
JOINER = re.compile("[+#&._%\\-]")
JIEBA_HAN = re.compile("[\u4e00-\u9fd5]")
JIEBA_SKIP = re.compile("([a-zA-Z0-9]+(?:\\.\\d+)?%?)")
DICTIONARY_JOINED = frozenset({"AT&T", "C#", "c#", "C++", "c++"})

_RJIEBA: Optional[object] = None
_RJIEBA_MISSING = False
# The summed frequency of jieba's own dictionary, to tell whether it was changed in this process.
_PRISTINE_TOTAL: Optional[int] = None


# jieba's blocks (jieba.re_han_default): jieba.cut segments each run of these characters, and each run
# between them, on its own (tests/pretrained/test_jieba_segmenter.py checks that the pattern is jieba's).
JIEBA_BLOCK = re.compile("([\u4e00-\u9fd5a-zA-Z0-9+#&\\._%\\-]+)", re.U)


def jieba_words(text: str) -> List[str]:
    """jieba's words of text (`jieba.cut(text)`, HMM on), in order; they join to the text."""
    fast = _rjieba()
    if fast is None:
        return list(load_jieba().cut(text))
    if not JIEBA_ONLY.search(text):
        return _rjieba_words(fast, text)
    words: List[str] = []
    for block in JIEBA_BLOCK.split(text):
        if block:
            words.extend(load_jieba().cut(block) if JIEBA_ONLY.search(block) else _rjieba_words(fast, block))
    return words


def _rjieba_words(fast, text: str) -> List[str]:
    """rjieba's words of text, each run rjieba keeps whole that jieba's HMM step splits (letters and
    digits with a joiner between, no Han character, not a dictionary word) split as jieba does."""
    words = fast.cut(text)
    if not JOINER.search(text):
        return words
    split: List[str] = []
    for word in words:
        if len(word) > 1 and JOINER.search(word) and not JIEBA_HAN.search(word) and word not in DICTIONARY_JOINED:
            split.extend(part for part in JIEBA_SKIP.split(word) if part)
        else:
            split.append(word)
    return split


def load_jieba():
    """jieba, its dictionary loaded: quietly (it logs the loading at DEBUG level on a stderr
    handler of its own, which every pipeline load, and `annotate --quiet`, would print)."""
    try:
        import jieba
    except ImportError as error:
        raise ImportError("SoftLexicon's softword needs jieba: pip install jieba.") from error
    if not jieba.dt.initialized:
        level = jieba.default_logger.level
        jieba.default_logger.setLevel(logging.WARNING)
        try:
            jieba.dt.initialize()
        finally:
            jieba.default_logger.setLevel(level)
        _record_pristine_total(jieba)
    return jieba


def _record_pristine_total(jieba) -> None:
    """jieba's own dictionary just loaded, nothing added yet (jieba.add_word and load_userdict load it
    first): its total is the pristine one, which _pristine_total would otherwise sum from dict.txt."""
    global _PRISTINE_TOTAL
    if _PRISTINE_TOTAL is None and _default_dictionary(jieba):
        _PRISTINE_TOTAL = jieba.dt.total


def _default_dictionary(jieba) -> bool:
    return jieba.dt.dictionary is None or Path(jieba.dt.dictionary) == Path(jieba.__file__).parent / "dict.txt"


def _rjieba():
    """rjieba, or None when it is not installed or jieba's dictionary was changed in this process."""
    global _RJIEBA, _RJIEBA_MISSING
    if _RJIEBA_MISSING or _jieba_changed():
        return None
    if _RJIEBA is None:
        try:
            import rjieba
        except ImportError:
            _RJIEBA_MISSING = True
            return None
        _RJIEBA = rjieba
    return _RJIEBA


def _jieba_changed() -> bool:
    """Whether this process changed jieba's dictionary (only possible once jieba has loaded it)."""
    import sys

    jieba = sys.modules.get("jieba")
    if jieba is None or not getattr(jieba.dt, "initialized", False):
        return False
    if not _default_dictionary(jieba):
        return True
    return jieba.dt.total != _pristine_total(jieba)


def _pristine_total(jieba) -> int:
    global _PRISTINE_TOTAL
    if _PRISTINE_TOTAL is None:
        total = 0
        with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf8") as lines:
            for line in lines:
                parts = line.split(" ")
                if len(parts) > 1:
                    total += int(parts[1])
        _PRISTINE_TOTAL = total
    return _PRISTINE_TOTAL
