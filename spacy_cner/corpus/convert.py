"""Readers that turn Chinese NER corpora into character-level spaCy Docs: the format detected, the
reader of its kind (corpus.chars, corpus.records) run, one Doc per sentence."""
import json
import warnings
from pathlib import Path
from typing import Iterator, List, Optional, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from ..tags import INPUT_SCHEMES, Entity
from .chars import (
    DOCSTART,
    SEG_DIGITS,
    TAG_FORMATS,
    decode_checked,
    decode_tags,
    detect_scheme,
    iter_tags,
    read_sentences,
    split_last_field,
)
from .problems import ConversionStats, Problems, check_choice, read_lines
from .records import OFFSET_FORMATS, read_offset_records

# What a caller of the converter imports from here, wherever it is written.
__all__ = [
    "FORMATS", "INPUT_SCHEMES", "ConversionStats", "decode_tags", "detect_format", "detect_scheme", "iter_docs",
    "read_sentences",
]

# chars-style formats (one token per line) and annotation-tool formats (text + offsets)
FORMATS = ("auto",) + TAG_FORMATS + OFFSET_FORMATS


# How many token lines the format sniffer looks at before deciding chars vs chars-seg.
_SNIFF_LINES = 50


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
    format (str): One of "auto", "chars", "chars-seg", "cluener".
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
    if format in OFFSET_FORMATS:
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
        for sentence in read_sentences(path, format=format, problems=problems):
            spans = decode_checked(sentence.tags, scheme, sentence.lines, sentence.index, problems)
            yield _make_doc(vocab, sentence.tokens, spans, stats)
    if stats.n_sentences == 0:
        raise ValueError(
            f"{path}: the file holds no sentences: expected at least one, got 0 (the file is "
            f"empty or blank, or --repair dropped every line). Check the path and --format "
            f"({format})."
        )


def detect_format(path: Union[str, Path]) -> str:
    """Guess the input format from the first lines of a file.

    path (Union[str, Path]): The input file.
    RETURNS (str): For a first non-empty line that is a JSON object: "cluener" (a "label"
        object), "doccano" (a "label" or "entities" list), "prodigy" ("spans"); "labelstudio"
        for a file that is one JSON array of tasks; else "chars-seg" if every token looks like
        a character followed by a word-position number (科0, s15), else "chars". A chars file
        whose first character is `{` or `[` stays "chars": only JSON that parses counts.
    """
    path = Path(path)
    n_seen = 0
    n_seg = 0
    for _, text in read_lines(path, problems=None):
        if not text.strip(" \t"):
            if n_seen:
                break
            continue
        if n_seen == 0:
            json_format = _detect_json_format(path, text)
            if json_format is not None:
                return json_format
        if text.startswith(DOCSTART):
            continue
        fields = split_last_field(text.rstrip(" \t"))
        n_seen += 1
        n_seg += fields is not None and SEG_DIGITS.match(fields[0]) is not None
        if n_seen >= _SNIFF_LINES:
            break
    return "chars-seg" if n_seen and n_seg == n_seen else "chars"


def _detect_json_format(path: Path, first_line: str) -> Optional[str]:
    """The JSON format of a file from its first non-empty line, or None if it is not JSON."""
    stripped = first_line.strip()
    if stripped.startswith("["):
        try:
            tasks = json.loads(path.read_text(encoding="utf8", errors="replace").lstrip("\ufeff"))
        except json.JSONDecodeError:
            return None
        return "labelstudio" if isinstance(tasks, list) else None
    if not stripped.startswith("{"):
        return None
    try:
        record = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    if "spans" in record:
        return "prodigy"
    if isinstance(record.get("label"), list) or isinstance(record.get("entities"), list):
        return "doccano"
    return "cluener"




def _make_doc(
    vocab: Vocab, tokens: List[str], spans: Optional[List[Entity]], stats: ConversionStats
) -> Doc:
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
