"""jieba's segmentation on rjieba: the same words as jieba on every corpus file and on random text."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_cner.pretrained import jieba_segmenter as segmenter
from spacy_cner.layers.soft_lexicon import softword_positions

from conftest import SHARED_DATA as DATA_DIR

jieba = pytest.importorskip("jieba", reason="softword needs jieba (the test extra installs it)")
# Han characters (common ones that form dictionary words, and rare ones), Latin letters and digits,
# the characters rjieba groups differently, whitespace, full-width punctuation, emoji, a BOM.
ALPHABET = list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可北京市长江大桥研究生命起源")
# Han characters at and beyond the edges of jieba's Han block (U+4E00-U+9FD5), which rjieba's blocks hold.
RARE_HAN = [
    "\u3400",
    "\u4dbf",
    "\u9fd5",
    "\u9fd6",
    "\u9fff",
    "\uf900",
    "\ufaff",
    "\U00020000",
    "\U0002a6df",
    "\U0002a700",
    "\U0002ceb0",
    "\U0002ebe0",
    "\U0002f800",
    "\U0002fa1d",
    "\U00030000",
]
ALPHABET += ["龘"] + RARE_HAN + list("abcXYZ0123456789") + list("+#&._%-") + list(" \t\n\u3000")
ALPHABET += list("，。！？；：“”（）《》、…—～/:@") + ["😀", "é", "\ufeff", "\u200b"]


def needs_rjieba():
    return pytest.importorskip(
        "rjieba", reason="rjieba is optional a requirement of spacy-cner that the fallback to jieba does without"
    )


def run_python(code: str) -> None:
    """Run code in a fresh interpreter (jieba's state is per process); fail with its stderr."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(ALPHABET), max_size=40))
def test_words_are_jiebas_on_random_text(text):
    needs_rjieba()
    assert segmenter.jieba_words(text) == list(jieba.cut(text))


@pytest.mark.parametrize("char", RARE_HAN)
def test_runs_of_rare_han_characters_are_jiebas(char):
    """rjieba makes one word of "㐀㐀" (its Han blocks are wider than jieba's); jieba splits it."""
    needs_rjieba()
    for text in (char * 2, char * 3 + "北京大学" + char * 2, "的" + char + char + "是"):
        assert segmenter.jieba_words(text) == list(jieba.cut(text))


def test_rjieba_is_used_where_it_agrees_and_jieba_elsewhere(monkeypatch):
    rjieba = needs_rjieba()
    assert segmenter._rjieba() is rjieba
    calls = []
    cut = rjieba.cut
    monkeypatch.setattr(rjieba, "cut", lambda text: calls.append(text) or cut(text), raising=False)
    assert segmenter.jieba_words("北京欢迎你") == list(jieba.cut("北京欢迎你"))
    # rjieba keeps "kfr-35gw" whole; split as jieba's HMM step splits it.
    assert segmenter.jieba_words("kfr-35gw空调") == list(jieba.cut("kfr-35gw空调")) == ["kfr", "-", "35gw", "空调"]
    assert segmenter.jieba_words("的㐀㐀是") == list(jieba.cut("的㐀㐀是"))  # rare Han: jieba's block by block
    assert calls == ["北京欢迎你", "kfr-35gw空调", "的", "是"]


def test_only_the_blocks_rjieba_would_segment_differently_go_to_jieba(monkeypatch):
    """jieba segments each of its blocks on its own: a text with one run of rare Han characters keeps
    rjieba for the rest."""
    rjieba = needs_rjieba()
    assert segmenter.JIEBA_BLOCK.pattern == jieba.re_han_default.pattern
    calls = []
    cut = rjieba.cut
    monkeypatch.setattr(rjieba, "cut", lambda text: calls.append(text) or cut(text), raising=False)
    text = "张三在北京市工作。2013.11.18 到 上海㐀㐀，kfr-35gw空调"
    assert segmenter.jieba_words(text) == list(jieba.cut(text))
    assert calls == ["张三在北京市工作", "。", "2013.11.18", " ", "到", " ", "上海", "kfr-35gw空调"]  # "㐀㐀，": jieba


def test_rjiebas_joined_runs_are_split_by_jiebas_own_patterns():
    """The patterns and words the split of rjieba's joined runs copies from jieba are jieba's."""
    import re
    import string
    from pathlib import Path

    from jieba import finalseg

    assert segmenter.JIEBA_SKIP.pattern == finalseg.re_skip.pattern
    assert "(" + segmenter.JIEBA_HAN.pattern + "+)" == finalseg.re_han.pattern
    # The joiners: the ASCII punctuation that jieba's blocks hold.
    assert [c for c in string.punctuation if segmenter.JOINER.fullmatch(c)] == [
        c for c in string.punctuation if jieba.re_han_default.fullmatch(c)
    ]
    text = (Path(jieba.__file__).parent / "dict.txt").read_text(encoding="utf8")
    joined = set(re.findall(r"^([^ \n]*[+#&._%\-][^ \n]*) ", text, re.M))
    assert segmenter.DICTIONARY_JOINED == joined


JOINED_ALPHABET = list("abcCTAXYZ0123456789+#&._%-") + list("的人北京") + [" ", "\n", "，"]
JOINED_ALPHABET += ["C++", "c#", "AT&T", "3G", "T恤", "1.5%", "Q币", "A.D."]


@settings(max_examples=500, deadline=None)
@given(text=st.lists(st.sampled_from(JOINED_ALPHABET), max_size=25).map("".join))
def test_words_are_jiebas_on_text_of_joined_letters_and_digits(text):
    needs_rjieba()
    assert segmenter.jieba_words(text) == list(jieba.cut(text))


def test_jiebas_dictionary_is_not_loaded_for_joined_letters_and_digits():
    """Only a run of rare Han characters needs jieba itself (its dictionary takes about a second to load)."""
    needs_rjieba()
    code = (
        "import sys\n"
        "from spacy_cner.pretrained import jieba_segmenter as segmenter\n"
        "assert segmenter.jieba_words('kfr-35gw空调2013.11.18，C++和AT&T') == "
        "['kfr', '-', '35gw', '空调', '2013.11', '.', '18', '，', 'C++', '和', 'AT&T']\n"
        "jieba = sys.modules.get('jieba')\n"
        "assert jieba is None or not jieba.dt.initialized\n"
        "segmenter.jieba_words('的㐀㐀是')\n"
        "assert sys.modules['jieba'].dt.initialized\n"
    )
    run_python(code)


def test_without_rjieba_the_features_are_the_same(monkeypatch):
    text = "张三在北京市工作。2013.11.18 轩轩唱儿歌 kfr-35gw"
    with_fast = softword_positions(text)
    monkeypatch.setitem(sys.modules, "rjieba", None)  # import rjieba raises ImportError
    monkeypatch.setattr(segmenter, "_RJIEBA", None)
    monkeypatch.setattr(segmenter, "_RJIEBA_MISSING", False)
    assert segmenter._rjieba() is None
    assert (softword_positions(text) == with_fast).all()


def test_a_changed_jieba_dictionary_turns_rjieba_off():
    """rjieba cannot see words added to jieba in this process: jieba segments everything then."""
    needs_rjieba()
    code = (
        "import jieba\n"
        "from spacy_cner.pretrained import jieba_segmenter as segmenter\n"
        "assert segmenter._rjieba() is not None\n"
        "segmenter.load_jieba()\n"
        "assert segmenter._rjieba() is not None  # loaded, unchanged\n"
        "jieba.add_word('欢迎你北', freq=10**9)\n"
        "assert segmenter._rjieba() is None\n"
        "assert segmenter.jieba_words('北京欢迎你北京') == list(jieba.cut('北京欢迎你北京'))\n"
        "assert '欢迎你北' in segmenter.jieba_words('北京欢迎你北京')\n"
    )
    run_python(code)


def test_the_pristine_total_is_recorded_when_spacy_cner_loads_jieba():
    """load_jieba records jieba's total as it loads its own dictionary: the same number summed from
    dict.txt, without reading the file again; a dictionary set before loading is not recorded."""
    code = (
        "import jieba\n"
        "from spacy_cner.pretrained import jieba_segmenter as segmenter\n"
        "segmenter.load_jieba()\n"
        "recorded = segmenter._PRISTINE_TOTAL\n"
        "assert recorded == jieba.dt.total\n"
        "segmenter._PRISTINE_TOTAL = None\n"
        "assert segmenter._pristine_total(jieba) == recorded\n"
    )
    run_python(code)
    small = (
        "import jieba, pathlib, tempfile\n"
        "from spacy_cner.pretrained import jieba_segmenter as segmenter\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'small.txt'\n"
        "path.write_text('北京 3 ns\\n欢迎 2 v\\n', encoding='utf8')\n"
        "jieba.set_dictionary(str(path))\n"
        "segmenter.load_jieba()\n"
        "assert segmenter._PRISTINE_TOTAL is None and segmenter._jieba_changed()\n"
    )
    run_python(small)


def corpus_texts(path):
    """The sentences of a one-character-per-line file (first field; blank lines between sentences)."""
    texts, sentence = [], []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            if sentence:
                texts.append("".join(sentence))
            sentence = []
        else:
            sentence.append(" " if line[0] in " \t" else line.split("\t")[0].split(" ")[0])
    return texts + (["".join(sentence)] if sentence else [])


CORPUS_FILES = sorted(p for p in DATA_DIR.glob("*/*") if p.name != "SOURCE.md") if DATA_DIR.exists() else []


@pytest.mark.skipif(not CORPUS_FILES, reason=f"needs the corpora in {DATA_DIR}")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=[f"{p.parent.name}/{p.name}" for p in CORPUS_FILES])
def test_words_are_jiebas_on_every_corpus_file(path):
    needs_rjieba()
    texts = corpus_texts(path)
    assert len(texts) > 100
    differ = [text for text in texts if segmenter.jieba_words(text) != list(jieba.cut(text))]
    assert differ == []
