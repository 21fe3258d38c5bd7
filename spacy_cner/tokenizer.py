"""spaCy's Chinese tokenizer, in time linear in the text's length."""

from typing import Iterable, List, Optional, Tuple

from spacy.attrs import IS_SPACE, LENGTH
from spacy.errors import Errors
from spacy.lang.zh import ChineseTokenizer, Segmenter
from spacy.tokens import Doc
from spacy.util import registry


@registry.tokenizers("spacy-cner.ChineseTokenizer.v1")
def create_chinese_tokenizer(segmenter: Segmenter = Segmenter.char):
    """spacy.zh.ChineseTokenizer with the same settings and the same tokens (see LinearChineseTokenizer)."""

    def chinese_tokenizer_factory(nlp):
        return LinearChineseTokenizer(nlp.vocab, segmenter=segmenter)

    return chinese_tokenizer_factory


class LinearChineseTokenizer(ChineseTokenizer):
    """spaCy's ChineseTokenizer (char, jieba or pkuseg segmentation), whose words are aligned
    with the text in linear time.

    spaCy's aligns each word by searching a copy of the rest of the text
    (spacy.util.get_words_and_spaces), quadratic in the text's length: seconds for a long
    text within nlp.max_length (BENCHMARKS.md#robustness, long documents).
    """

    def __call__(self, text: str) -> Doc:
        _check_encodable(text)
        if self.segmenter == Segmenter.char:
            if text.split() == [text]:
                # No whitespace: one token per character, none followed by a space (what
                # words_and_spaces gives such a text, without its loop: most texts, a share of nlp.pipe).
                return Doc(self.vocab, words=list(text), spaces=[False] * len(text))
            words = list(text)
        elif self.segmenter == Segmenter.jieba:
            words = [word for word in self.jieba_seg.cut(text, cut_all=False) if word]
        elif self.segmenter == Segmenter.pkuseg and self.pkuseg_seg is not None:
            words = self.pkuseg_seg.cut(text)
        else:
            return super().__call__(text)  # spaCy's error or warning
        words, spaces = words_and_spaces(words, text)
        return Doc(self.vocab, words=words, spaces=spaces)


def _check_encodable(text: str) -> None:
    """A lone surrogate (half of a UTF-16 pair, e.g. from a broken decode) cannot be stored in spaCy's
    StringStore: say where it is, instead of a UnicodeEncodeError from deep inside the Doc."""
    try:
        text.encode("utf8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"The text has a lone surrogate {text[err.start]!r} at character {err.start} (of {len(text)}), "
            "which is not valid Unicode text: decode the input with errors='replace' (U+FFFD), or "
            "`python -m spacy_cner convert --repair`."
        ) from None


def words_and_spaces(words: Iterable[str], text: str) -> Tuple[List[str], List[bool]]:
    """spacy.util.get_words_and_spaces, searching the text in place: the same words and spaces."""
    words = list(words)
    if "".join("".join(words).split()) != "".join(text.split()):
        raise ValueError(Errors.E194.format(text=text, words=words))
    text_words: List[str] = []
    text_spaces: List[bool] = []
    text_pos = 0
    for word in (word for word in words if not word.isspace()):
        try:
            word_start = text.index(word, text_pos) - text_pos
        except ValueError:
            raise ValueError(Errors.E194.format(text=text, words=words)) from None
        if word_start > 0:
            text_words.append(text[text_pos : text_pos + word_start])
            text_spaces.append(False)
            text_pos += word_start
        text_words.append(word)
        text_spaces.append(False)
        text_pos += len(word)
        if text_pos < len(text) and text[text_pos] == " ":
            text_spaces[-1] = True
            text_pos += 1
    if text_pos < len(text):
        text_words.append(text[text_pos:])
        text_spaces.append(False)
    return text_words, text_spaces


def character_copy(doc: Doc) -> Optional[Doc]:
    """A copy of the doc with one token per character (and its pre-set entities), or None when
    every non-space token already is one character (or the doc is empty)."""
    if not len(doc):
        return None
    lengths, is_space = doc.to_array([LENGTH, IS_SPACE]).T
    if not (lengths[is_space == 0] > 1).any():
        return None
    words, spaces = words_and_spaces(list(doc.text), doc.text)
    char_doc = Doc(doc.vocab, words=words, spaces=spaces)
    char_doc.set_ents(
        [char_doc.char_span(e.start_char, e.end_char, label=e.label, kb_id=e.kb_id) for e in doc.ents],
        default="unmodified",
    )
    return char_doc
