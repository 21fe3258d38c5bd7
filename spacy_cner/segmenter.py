"""Moved to spacy_cner.pretrained.jieba_segmenter (jieba's dictionary and HMM, a segmenter trained elsewhere);
this module keeps the old import path for one release (CHANGELOG.md)."""

from .pretrained.jieba_segmenter import (  # noqa: F401
    DICTIONARY_JOINED,
    JIEBA_BLOCK,
    JIEBA_HAN,
    JIEBA_ONLY,
    JIEBA_SKIP,
    JOINER,
    jieba_words,
    load_jieba,
)
