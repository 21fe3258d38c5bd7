"""jieba's word segmentation, on rjieba (jieba's Rust port) where the two give the same words.

SoftLexicon's softword feature is each character's position in jieba's segmentation; jieba's
Python segmenter took 16% of the default pipeline's inference (Resume test). rjieba segments
the same text about 14 times faster and gives exactly jieba's words (HMM on), except in runs of
letters and digits joined by one of + # & . _ % - ("2013.11.18", "kfr-35gw": rjieba keeps them
whole, jieba splits them) and in runs of rare Han characters outside jieba's Han block ("㐀㐀": rjieba
makes one word, jieba two). jieba segments each of its blocks (a run of its Han characters, letters,
digits and those joiners, or a run of anything else) on its own, so a block holding one of those
characters goes to jieba and the others to rjieba: on every file of ../shared/data (85,431
sentences) and on random text the words are then jieba's (tests/test_segmenter.py). Without rjieba
(a requirement, but one a platform may lack), and when jieba's dictionary was changed in this
process (jieba.load_userdict, jieba.add_word, jieba.set_dictionary: rjieba would not see it), every
text goes to jieba.
"""
import logging
import re
from pathlib import Path
from typing import List, Optional

# The characters that rjieba groups differently from jieba, so that a text holding one is segmented by
# jieba itself: the joiners of jieba's Han-and-alphanumeric blocks (jieba.re_han_default), and the Han
# characters outside jieba's U+4E00-U+9FD5 that rjieba's Han blocks hold (CJK Extension A, U+9FD6-U+9FFF,
# the compatibility ideographs, Extensions B-F and their supplement): jieba splits a run of those into
# single characters, rjieba segments it as words.
JIEBA_ONLY = re.compile("[+#&._%\\-\u3400-\u4dbf\u9fd6-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")

_RJIEBA: Optional[object] = None
_RJIEBA_MISSING = False
# The summed frequency of jieba's own dictionary, to tell whether it was changed in this process.
_PRISTINE_TOTAL: Optional[int] = None


# jieba's blocks (jieba.re_han_default): jieba.cut segments each run of these characters, and each run
# between them, on its own (tests/test_segmenter.py checks that the pattern is jieba's).
JIEBA_BLOCK = re.compile("([\u4E00-\u9FD5a-zA-Z0-9+#&\\._%\\-]+)", re.U)


def jieba_words(text: str) -> List[str]:
    """jieba's words of text (`jieba.cut(text)`, HMM on), in order; they join to the text."""
    fast = _rjieba()
    if fast is None:
        return list(load_jieba().cut(text))
    if not JIEBA_ONLY.search(text):
        return fast.cut(text)
    words: List[str] = []
    for block in JIEBA_BLOCK.split(text):
        if block:
            words.extend(load_jieba().cut(block) if JIEBA_ONLY.search(block) else fast.cut(block))
    return words


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
    first): its total is the pristine one, which _pristine_total would otherwise sum from dict.txt
    (0.4 s)."""
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
