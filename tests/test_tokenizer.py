"""spacy-cner.ChineseTokenizer.v1: spaCy's Chinese tokenizer's tokens, in linear time."""

import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.util import get_words_and_spaces, load_config, load_model_from_config

from spacy_cner.tokenizer import LinearChineseTokenizer, words_and_spaces

from conftest import REPO_ROOT

TEXTS = st.lists(st.sampled_from(list("张三去了上海。ab 1\n\t\u3000\xa0") + ["  ", "\r\n"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_same_words_and_spaces_as_spacy(text):
    assert words_and_spaces(list(text), text) == get_words_and_spaces(list(text), text)
    words = text.split()  # whitespace-separated words, as a segmenter might give them
    assert words_and_spaces(words, text) == get_words_and_spaces(words, text)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_char_tokens_as_spacys(text):
    """The char tokenizer's tokens (its shortcut for texts without whitespace included) are spaCy's."""
    ours = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1"}}})
    words, spaces = get_words_and_spaces(list(text), text)
    assert [(t.text, bool(t.whitespace_)) for t in ours(text)] == list(zip(words, spaces))


def test_words_that_do_not_match_the_text_raise_spacys_error():
    with pytest.raises(ValueError, match="E194"):
        words_and_spaces(["张", "四"], "张三")


@pytest.mark.parametrize("segmenter", ["char", "jieba"])
def test_same_docs_as_spacys_tokenizer(segmenter, tmp_path):
    if segmenter == "jieba":
        pytest.importorskip("jieba", reason="needs jieba (a requirement of spacy-cner)")
    config = {"nlp": {"tokenizer": {"segmenter": segmenter}}}
    spacy_nlp = spacy.blank("zh", config=config)
    ours = spacy.blank(
        "zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1", "segmenter": segmenter}}}
    )
    assert isinstance(ours.tokenizer, LinearChineseTokenizer)
    text = "张三 去了上海。\n\n李四在阿里巴巴 工作\u3000ab  12"
    expected = [(t.text, t.whitespace_) for t in spacy_nlp(text)]
    assert [(t.text, t.whitespace_) for t in ours(text)] == expected
    ours.to_disk(tmp_path)
    assert [(t.text, t.whitespace_) for t in spacy.load(tmp_path)(text)] == expected


def test_every_config_uses_it():
    for path in sorted((REPO_ROOT / "configs").glob("*.cfg")):
        nlp = load_model_from_config(load_config(path), auto_fill=True)
        assert isinstance(nlp.tokenizer, LinearChineseTokenizer), path.name


@pytest.mark.parametrize("segmenter", ["char", "jieba"])
def test_a_lone_surrogate_is_a_clear_error_naming_its_position(segmenter):
    nlp = spacy.blank(
        "zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1", "segmenter": segmenter}}}
    )
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at character 2 \(of 7\)"):
        nlp("张三\ud800去了上海")
    assert len(nlp("张三\ufffd去了上海")) >= 5  # the replacement character is text like any other
