"""Readers that turn Chinese NER corpora into character-level spaCy Docs: the format detected, the
reader of its kind (formats.py's table: corpus.chars, corpus.records) run, one Doc per sentence."""

import warnings
from pathlib import Path
from typing import Iterator, List, Optional, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from ..tags import INPUT_SCHEMES, Entity
from .chars import decode_checked, decode_tags, detect_scheme, iter_tags, read_sentences
from .formats import READ_FORMATS, detect_format
from .formats import FORMATS as FORMAT_TABLE
from .problems import ConversionStats, Problems, check_choice
from .records import read_offset_records

# What a caller of the converter imports from here, wherever it is written.
__all__ = [
    "FORMATS",
    "INPUT_SCHEMES",
    "ConversionStats",
    "decode_tags",
    "detect_format",
    "detect_scheme",
    "iter_docs",
    "read_sentences",
]

# chars-style formats (one token per line) and annotation-tool formats (text + offsets)
FORMATS = ("auto",) + READ_FORMATS


def iter_docs(
    path: Union[str, Path],
    format: str = "auto",
    scheme: str = "auto",
    repair: bool = False,
    vocab: Optional[Vocab] = None,
    stats: Optional[ConversionStats] = None,
) -> Iterator[Doc]:
    """Stream character-level Docs from one NER file, filling in `stats` as it goes.

    path (Union[str, Path]): The input file.
    format (str): One of FORMATS: "auto" or a format of corpus.formats (chars, chars-seg,
        cluener, doccano, prodigy, labelstudio).
    scheme (str): Tag scheme for the chars formats: "auto", "bio", "iob", "bmes", "bioes".
    repair (bool): Repair malformed input and report each repair instead of raising.
    vocab (Optional[Vocab]): The vocab for the Docs; a new one if None.
    stats (Optional[ConversionStats]): Filled in while iterating; read it once exhausted.
    YIELDS (Doc): One Doc per sentence; tokens are the characters, with no spaces.
    """
    path = Path(path)
    check_choice("format", format, FORMATS)
    check_choice("scheme", scheme, INPUT_SCHEMES)
    if stats is None:
        stats = ConversionStats(path=str(path))
    if vocab is None:
        vocab = Vocab()
    if format == "auto":
        format = detect_format(path)
    elif format == "chars" and detect_format(path) == "chars-seg":
        warnings.warn(
            f"{path}: every token of its first sentences is a character followed by a word position "
            f"(科0, s15: Weibo's format), read with format 'chars', which keeps the digits in the text "
            f"and the tokens as multi-character ones. Use format 'chars-seg' (or 'auto') to strip them.",
            stacklevel=2,
        )
    stats.format = format
    problems = Problems(str(path), repair, stats.repairs, stats.notes)
    if not FORMAT_TABLE[format].tags:
        if scheme != "auto":
            raise ValueError(
                f"--scheme for {path}: expected 'auto' with format {format} (its spans carry "
                f"offsets, not tags), got {scheme!r}. Drop --scheme."
            )
        for tokens, spans, record_id in read_offset_records(path, format, problems=problems):
            doc = _make_doc(vocab, tokens, spans, stats)
            if record_id is not None:  # kept for `export --format doccano` (saved: DocBin(store_user_data))
                doc.user_data["id"] = record_id
            yield doc
    else:
        if scheme == "auto":
            scheme = detect_scheme(iter_tags(path, format))
        stats.scheme = scheme
        for sentence in FORMAT_TABLE[format].read(path, format=format, problems=problems):
            spans = decode_checked(sentence.tags, scheme, sentence.lines, sentence.index, problems)
            yield _make_doc(vocab, sentence.tokens, spans, stats)
    if stats.n_sentences == 0:
        raise ValueError(
            f"{path}: the file holds no sentences: expected at least one, got 0 (the file is "
            f"empty or blank, or --repair dropped every line). Check the path and --format "
            f"({format})."
        )


def _make_doc(vocab: Vocab, tokens: List[str], spans: Optional[List[Entity]], stats: ConversionStats) -> Doc:
    """Build one Doc and count it; spans None leaves the entity annotation missing."""
    doc = Doc(vocab, words=tokens, spaces=[False] * len(tokens))
    stats.n_sentences += 1
    stats.n_chars += len(tokens)
    if spans is None:
        stats.n_unannotated += 1
        return doc
    doc.set_ents([Span(doc, s, e, label=lab) for s, e, lab in spans], default="outside")
    stats.n_entities += len(spans)
    stats.entity_counts.update(lab for _, _, lab in spans)
    return doc
