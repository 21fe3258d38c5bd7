"""Readers that turn Chinese NER corpora into character-level spaCy Docs."""
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

# (start, end, label) with token offsets and an exclusive end, like spaCy spans.
EntitySpan = Tuple[int, int, str]

FORMATS = ("auto", "chars", "chars-seg", "cluener")
SCHEMES = ("auto", "bio", "iob", "bmes", "bioes")
# Prefixes each scheme allows besides "O"; the second item is the continuation prefix.
SCHEME_PREFIXES: Dict[str, Tuple[str, ...]] = {
    "bio": ("B", "I"),
    "iob": ("B", "I"),
    "bmes": ("B", "M", "E", "S"),
    "bioes": ("B", "I", "E", "S"),
}
SCHEME_NAMES = {"bio": "BIO (IOB2)", "iob": "IOB (IOB1)", "bmes": "BMES", "bioes": "BIOES"}
REPAIR_OPTION = "--repair (repair=True)"

_COLUMN_SEP = re.compile(r"[ \t]+")
_ASCII_DIGITS = "0123456789"
_BOM = b"\xef\xbb\xbf"
# How many token lines the format sniffer looks at before deciding chars vs chars-seg.
_SNIFF_LINES = 50


@dataclass
class Repair:
    """One problem in the input that was repaired instead of raising."""

    kind: str
    line: int
    sentence: int
    message: str


@dataclass
class ConversionStats:
    """Counts and repairs from converting one file."""

    path: str
    format: str = "auto"
    scheme: Optional[str] = None
    n_sentences: int = 0
    n_chars: int = 0
    n_entities: int = 0
    n_unannotated: int = 0
    entity_counts: Counter = field(default_factory=Counter)
    repairs: List[Repair] = field(default_factory=list)

    @property
    def repair_counts(self) -> Counter:
        """Number of repairs per kind."""
        return Counter(repair.kind for repair in self.repairs)

    @property
    def n_repairs(self) -> int:
        """Total number of repairs."""
        return len(self.repairs)


class _Problems:
    """Raises a ValueError for a problem, or records it as a Repair when repairing."""

    def __init__(self, path: str, repair: bool, repairs: List[Repair]) -> None:
        self.path = path
        self.repair = repair
        self.repairs = repairs

    def __call__(self, kind: str, line: int, sentence: int, message: str, fix: str) -> None:
        if not self.repair:
            raise ValueError(
                f"{self.path}:{line}: {message}. Fix the file, or rerun with "
                f"{REPAIR_OPTION} to {fix}."
            )
        self.repairs.append(Repair(kind, line, sentence, f"{message}; repaired: {fix}"))


def convert_file(
    path: Union[str, Path],
    format: str = "auto",
    scheme: str = "auto",
    repair: bool = False,
    vocab: Optional[Vocab] = None,
) -> Tuple[List[Doc], ConversionStats]:
    """Convert one NER file into character-level Docs with entities set.

    path (Union[str, Path]): The input file.
    format (str): One of "auto", "chars", "chars-seg", "cluener".
    scheme (str): Tag scheme for the chars formats: "auto", "bio", "iob", "bmes", "bioes".
    repair (bool): Repair malformed input and report each repair instead of raising.
    vocab (Optional[Vocab]): The vocab for the Docs; a new one if None.
    RETURNS (Tuple[List[Doc], ConversionStats]): One Doc per sentence, and the counts.
    """
    stats = ConversionStats(path=str(path))
    docs = iter_docs(path, format=format, scheme=scheme, repair=repair, vocab=vocab, stats=stats)
    return list(docs), stats


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
    _check_choice("format", format, FORMATS)
    _check_choice("scheme", scheme, SCHEMES)
    if stats is None:
        stats = ConversionStats(path=str(path))
    if vocab is None:
        vocab = Vocab()
    if format == "auto":
        format = detect_format(path)
    stats.format = format
    problems = _Problems(str(path), repair, stats.repairs)
    if format == "cluener":
        if scheme != "auto":
            raise ValueError(
                f"--scheme for {path}: expected 'auto' with format cluener (its spans carry "
                f"offsets, not tags), got {scheme!r}. Drop --scheme."
            )
        for tokens, spans in read_cluener(path, problems=problems):
            yield _make_doc(vocab, tokens, spans, stats)
    else:
        if scheme == "auto":
            scheme = detect_scheme(_iter_tags(path, format))
        stats.scheme = scheme
        for sentence in read_sentences(path, format=format, problems=problems):
            spans = _decode(sentence.tags, scheme, sentence.lines, sentence.index, problems)
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
    RETURNS (str): "cluener" if the first non-empty line is a JSON object, "chars-seg" if the
        tokens look like a character followed by a digit (科0), else "chars".
    """
    n_seen = 0
    n_seg = 0
    for _, text in _iter_lines(Path(path), problems=None):
        stripped = text.strip(" \t")
        if not stripped:
            if n_seen:
                break
            continue
        if n_seen == 0 and stripped.startswith("{"):
            return "cluener"
        token = _COLUMN_SEP.split(stripped)[0]
        n_seen += 1
        n_seg += len(token) == 2 and token[1] in _ASCII_DIGITS
        if n_seen >= _SNIFF_LINES:
            break
    return "chars-seg" if n_seen and n_seg == n_seen else "chars"


def detect_scheme(tags: Iterable[str]) -> str:
    """Guess the tag scheme: BMES/BIOES if any M-, E- or S- tag occurs, else strict BIO.

    tags (Iterable[str]): All tags of a file.
    RETURNS (str): "bmes" if an M- tag occurs, else "bioes" if an E- or S- tag occurs, else "bio".
    """
    prefixes = set()
    for tag in tags:
        if len(tag) > 2 and tag[1] == "-":
            prefixes.add(tag[0])
    if "M" in prefixes:
        return "bmes"
    if "E" in prefixes or "S" in prefixes:
        return "bioes"
    return "bio"


@dataclass
class Sentence:
    """One sentence of a chars file: tokens, tags and the 1-based line of each token."""

    index: int
    tokens: List[str]
    tags: List[str]
    lines: List[int]


def read_sentences(
    path: Union[str, Path],
    format: str = "chars",
    repair: bool = False,
    problems: Optional[_Problems] = None,
) -> Iterator[Sentence]:
    """Stream the sentences of a one-token-per-line file, line by line.

    path (Union[str, Path]): The input file (UTF-8, BOM and CRLF accepted).
    format (str): "chars" (`char tag`) or "chars-seg" (`char+digit tag`, as in Weibo NER).
    repair (bool): Repair malformed lines instead of raising (ignored if `problems` is given).
    YIELDS (Sentence): The non-empty sentences, in file order.
    """
    path = Path(path)
    if format not in ("chars", "chars-seg"):
        raise ValueError(
            f"format for read_sentences: expected 'chars' or 'chars-seg', got {format!r}. "
            f"Use read_cluener for JSON lines."
        )
    if problems is None:
        problems = _Problems(str(path), repair, [])
    index = 0
    tokens: List[str] = []
    tags: List[str] = []
    lines: List[int] = []
    for line_no, text in _iter_lines(path, problems=problems, sentence=lambda: index):
        stripped = text.strip(" \t")
        if not stripped:
            if tokens:
                yield Sentence(index, tokens, tags, lines)
                index += 1
                tokens, tags, lines = [], [], []
            continue
        columns = _COLUMN_SEP.split(stripped)
        if len(columns) == 1:
            problems(
                "missing_tag", line_no, index,
                f"line {stripped!r} has no tag: expected `char<space or tab>tag`, got 1 column",
                "tag it O",
            )
            columns.append("O")
        elif len(columns) > 2:
            problems(
                "extra_columns", line_no, index,
                f"line {stripped!r} has {len(columns)} columns: expected 2 (`char tag`)",
                f"keep the first and the last column ({columns[0]!r}, {columns[-1]!r})",
            )
            columns = [columns[0], columns[-1]]
        token, tag = columns
        if format == "chars-seg":
            token = _strip_seg_digit(token, line_no, index, problems)
        tokens.append(token)
        tags.append(tag)
        lines.append(line_no)
    if tokens:
        yield Sentence(index, tokens, tags, lines)


def decode_tags(
    tags: Sequence[str],
    scheme: str,
    repair: bool = False,
    lines: Optional[Sequence[int]] = None,
    path: str = "<tags>",
    sentence: int = 0,
) -> Tuple[List[EntitySpan], List[Repair]]:
    """Turn one sentence's tags into entity spans, checking that they are well formed.

    tags (Sequence[str]): One tag per token, e.g. ["B-ORG", "M-ORG", "E-ORG", "O"].
    scheme (str): "bio", "iob", "bmes" or "bioes".
    repair (bool): Repair malformed tags and report each repair instead of raising.
    lines (Optional[Sequence[int]]): The 1-based line of each tag, for messages.
    path (str): The file name, for messages.
    sentence (int): The 0-based sentence index, for the repair records.
    RETURNS (Tuple[List[EntitySpan], List[Repair]]): (start, end, label) spans with an exclusive
        end, and the repairs made.
    """
    if scheme not in SCHEME_PREFIXES:
        raise ValueError(
            f"scheme: expected one of {sorted(SCHEME_PREFIXES)}, got {scheme!r}. "
            f"Use detect_scheme to pick one from the tags."
        )
    if lines is None:
        lines = list(range(1, len(tags) + 1))
    repairs: List[Repair] = []
    spans = _decode(tags, scheme, lines, sentence, _Problems(path, repair, repairs))
    return spans, repairs


def read_cluener(
    path: Union[str, Path],
    repair: bool = False,
    problems: Optional[_Problems] = None,
) -> Iterator[Tuple[List[str], Optional[List[EntitySpan]]]]:
    """Stream CLUENER JSON lines as characters and checked entity spans.

    path (Union[str, Path]): JSON lines `{"text": ..., "label": {type: {surface: [[s, e], ...]}}}`,
        `e` inclusive.
    repair (bool): Drop bad records and spans and report them instead of raising (ignored if
        `problems` is given).
    YIELDS (Tuple[List[str], Optional[List[EntitySpan]]]): The characters and the spans (exclusive
        end, sorted), or None when the record has no "label" (unannotated, e.g. a test set).
    """
    path = Path(path)
    if problems is None:
        problems = _Problems(str(path), repair, [])
    index = 0
    for line_no, text in _iter_lines(path, problems=problems, sentence=lambda: index):
        if not text.strip():
            continue
        record = _parse_cluener_record(text, line_no, index, problems)
        if record is None:
            continue
        sentence_text, label = record
        spans = None
        if label is not None:
            spans = _cluener_spans(sentence_text, label, line_no, index, problems)
        yield list(sentence_text), spans
        index += 1


def _decode(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[EntitySpan]:
    """Decode tags with `problems` deciding between raising and repairing."""
    if scheme in ("bmes", "bioes"):
        return _decode_bmes(tags, scheme, lines, sentence, problems)
    return _decode_bio(tags, scheme, lines, sentence, problems)


def _decode_bio(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[EntitySpan]:
    """Decode BIO (IOB2) or IOB (IOB1) tags."""
    spans: List[EntitySpan] = []
    start: Optional[int] = None
    label = ""
    for i, tag in enumerate(tags):
        prefix, tag_label = _split_tag(tag, scheme, lines[i], sentence, problems)
        continues = start is not None and tag_label == label
        if prefix == "I" and continues:
            continue
        if start is not None:
            spans.append((start, i, label))
            start = None
        if prefix == "O":
            continue
        if prefix == "I" and scheme == "bio":
            if i > 0 and spans and spans[-1][1] == i:
                problems(
                    "type_mismatch", lines[i], sentence,
                    f"{tag} continues an entity of another type: expected I-{spans[-1][2]}, "
                    f"O or a B- tag after {tags[i - 1]}",
                    f"end the {spans[-1][2]} entity and open a new {tag_label} entity here",
                )
            else:
                got = "the start of the sentence" if i == 0 else tags[i - 1]
                problems(
                    "missing_opening", lines[i], sentence,
                    f"{tag} has no opening tag: expected B-{tag_label} or I-{tag_label} before "
                    f"it, got {got} (if the file is IOB1, use --scheme iob)",
                    f"open a new {tag_label} entity here",
                )
        elif prefix == "B" and scheme == "iob" and not continues:
            got = "the start of the sentence" if i == 0 else tags[i - 1]
            problems(
                "iob1_b_opening", lines[i], sentence,
                f"{tag} in IOB1 must directly follow a {tag_label} entity: expected I-{tag_label} "
                f"to open an entity after {got} (if the file is IOB2, use --scheme bio)",
                f"open a new {tag_label} entity here",
            )
        start, label = i, tag_label
    if start is not None:
        spans.append((start, len(tags), label))
    return spans


def _decode_bmes(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[EntitySpan]:
    """Decode BMES or BIOES tags; every B- must be closed by an E- of the same type."""
    middle = "M" if scheme == "bmes" else "I"
    spans: List[EntitySpan] = []
    start: Optional[int] = None
    label = ""

    def close_unclosed(i: int, got: str) -> None:
        last = i - 1
        problems(
            "unclosed_entity", lines[last], sentence,
            f"{label} entity opened by {tags[start]} on line {lines[start]} is not closed: "
            f"expected E-{label} (or S-{label} for one character) on this line, got "
            f"{tags[last]}, followed by {got}",
            f"end the {label} entity on this line",
        )
        spans.append((start, i, label))

    for i, tag in enumerate(tags):
        prefix, tag_label = _split_tag(tag, scheme, lines[i], sentence, problems)
        if prefix in ("O", "B", "S"):
            if start is not None:
                close_unclosed(i, f"{tag} on line {lines[i]}")
                start = None
            if prefix == "B":
                start, label = i, tag_label
            elif prefix == "S":
                spans.append((i, i + 1, tag_label))
            continue
        # prefix is the continuation (M- or I-) or E-
        if start is None:
            got = "the start of the sentence" if i == 0 else tags[i - 1]
            problems(
                "missing_opening", lines[i], sentence,
                f"{tag} has no opening tag: expected B-{tag_label} or {middle}-{tag_label} "
                f"before it, got {got}",
                f"open a new {tag_label} entity here",
            )
            start, label = i, tag_label
        elif tag_label != label:
            problems(
                "type_mismatch", lines[i], sentence,
                f"{tag} continues a {label} entity opened by {tags[start]} on line "
                f"{lines[start]}: expected {middle}-{label} or E-{label}, got {tag}",
                f"end the {label} entity before this line and open a new {tag_label} entity here",
            )
            spans.append((start, i, label))
            start, label = i, tag_label
        if prefix == "E":
            spans.append((start, i + 1, label))
            start = None
    if start is not None:
        close_unclosed(len(tags), "the end of the sentence (did a blank line split the entity?)")
    return spans


def _split_tag(
    tag: str, scheme: str, line: int, sentence: int, problems: _Problems
) -> Tuple[str, str]:
    """Split a tag into (prefix, label); unknown tags are problems repaired as O."""
    if tag == "O":
        return "O", ""
    allowed = SCHEME_PREFIXES[scheme]
    prefix, sep, label = tag.partition("-")
    if sep and label and prefix in allowed:
        return prefix, label
    expected = ", ".join(f"{p}-TYPE" for p in allowed) + " or O"
    if sep and prefix in allowed:
        reason = f"tag {tag!r} has an empty entity type"
    else:
        reason = f"tag {tag!r} has an unknown prefix for {SCHEME_NAMES[scheme]}"
    problems(
        "unknown_tag", line, sentence,
        f"{reason}: expected {expected} (the types follow a '-'); pick the file's scheme with "
        f"--scheme {{bio,iob,bmes,bioes}} if it is another",
        "tag it O",
    )
    return "O", ""


def _strip_seg_digit(token: str, line: int, sentence: int, problems: _Problems) -> str:
    """Strip the word-position digit from a chars-seg token like 科0."""
    if len(token) == 2 and token[1] in _ASCII_DIGITS:
        return token[0]
    if len(token) > 1 and token[-1] in _ASCII_DIGITS:
        fixed, fix = token[:-1], f"strip the last digit, keeping {token[:-1]!r}"
    else:
        fixed, fix = token, f"keep the token {token!r} as it is"
    problems(
        "bad_token", line, sentence,
        f"token {token!r} is not a character followed by a word-position digit: expected e.g. "
        f"'科0' (format chars-seg; use --format chars if the file has no digits)",
        fix,
    )
    return fixed


def _parse_cluener_record(
    text: str, line: int, sentence: int, problems: _Problems
) -> Optional[Tuple[str, Optional[dict]]]:
    """Parse one CLUENER line into (text, label or None); None if the line was dropped."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        problems(
            "invalid_json", line, sentence,
            f"invalid JSON ({err.msg} at column {err.colno}): expected one JSON object per line, "
            f"got {_preview(text)}",
            "drop this line",
        )
        return None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        got = type(record).__name__ if not isinstance(record, dict) else (
            f"text={_preview(repr(record.get('text')))}"
        )
        problems(
            "invalid_record", line, sentence,
            f'record is not a CLUENER object: expected {{"text": str, "label": {{...}}}}, '
            f"got {got}",
            "drop this line",
        )
        return None
    if not record["text"]:
        problems(
            "empty_text", line, sentence,
            'empty "text": expected at least one character, got ""',
            "drop this line",
        )
        return None
    label = record.get("label")
    if label is not None and not isinstance(label, dict):
        problems(
            "invalid_record", line, sentence,
            f'"label" is not an object: expected {{type: {{surface: [[start, end], ...]}}}}, '
            f"got {_preview(json.dumps(label, ensure_ascii=False))}",
            "drop the label and keep the sentence unannotated",
        )
        label = None
    return record["text"], label


def _cluener_spans(
    text: str, label: dict, line: int, sentence: int, problems: _Problems
) -> List[EntitySpan]:
    """Check CLUENER label offsets against the text; return sorted spans with exclusive ends."""
    candidates: List[EntitySpan] = []
    for ent_type, surfaces in label.items():
        if not isinstance(surfaces, dict):
            problems(
                "invalid_record", line, sentence,
                f"label {ent_type!r}: expected {{surface: [[start, end], ...]}}, got "
                f"{_preview(json.dumps(surfaces, ensure_ascii=False))}",
                f"drop the {ent_type} entities of this line",
            )
            continue
        for surface, offsets in surfaces.items():
            if not isinstance(offsets, list):
                offsets = [offsets]
            for offset in offsets:
                span = _check_offset(text, ent_type, surface, offset, line, sentence, problems)
                if span is not None:
                    candidates.append(span)
    return _resolve_overlaps(text, candidates, line, sentence, problems)


def _check_offset(
    text: str, ent_type: str, surface: str, offset, line: int, sentence: int, problems: _Problems
) -> Optional[EntitySpan]:
    """Check one [start, end_inclusive] pair; None if it was dropped."""
    where = f"{ent_type} {surface!r} at {json.dumps(offset)}"
    is_pair = (
        isinstance(offset, list)
        and len(offset) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in offset)
    )
    if not is_pair:
        problems(
            "invalid_span", line, sentence,
            f"{where}: expected [start, end] with integer offsets, got {json.dumps(offset)}",
            "drop this span",
        )
        return None
    start, end = offset
    if not 0 <= start <= end < len(text):
        problems(
            "span_out_of_range", line, sentence,
            f"{where}: expected 0 <= start <= end < {len(text)} (text length, end inclusive), "
            f"got start={start}, end={end}",
            "drop this span",
        )
        return None
    if text[start : end + 1] != surface:
        problems(
            "surface_mismatch", line, sentence,
            f"{where}: expected text[{start}:{end + 1}] == {surface!r}, got "
            f"{text[start:end + 1]!r} (offsets are 0-based, end inclusive)",
            "drop this span",
        )
        return None
    return start, end + 1, ent_type


def _resolve_overlaps(
    text: str, spans: List[EntitySpan], line: int, sentence: int, problems: _Problems
) -> List[EntitySpan]:
    """Keep non-overlapping spans, longer first; each dropped span is a problem."""
    kept: List[EntitySpan] = []
    taken: Dict[int, EntitySpan] = {}
    for span in sorted(spans, key=lambda s: (-(s[1] - s[0]), s[0], s[2])):
        start, end, ent_type = span
        clash = next((taken[i] for i in range(start, end) if i in taken), None)
        if clash is None:
            kept.append(span)
            taken.update((i, span) for i in range(start, end))
            continue
        problems(
            "overlap", line, sentence,
            f"{ent_type} {text[start:end]!r} at [{start}, {end - 1}] overlaps {clash[2]} "
            f"{text[clash[0]:clash[1]]!r} at [{clash[0]}, {clash[1] - 1}]: expected "
            f"non-overlapping spans (a token has one entity)",
            f"keep the longer {clash[2]} span and drop this {ent_type} span",
        )
    return sorted(kept)


def _make_doc(
    vocab: Vocab, tokens: List[str], spans: Optional[List[EntitySpan]], stats: ConversionStats
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


def _iter_lines(
    path: Path, problems: Optional[_Problems], sentence: Callable[[], int] = lambda: 0
) -> Iterator[Tuple[int, str]]:
    """Yield (1-based line number, text) without line endings; BOM and CRLF accepted."""
    with path.open("rb") as file_:
        for line_no, raw in enumerate(file_, start=1):
            if line_no == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            raw = raw.rstrip(b"\r\n")
            try:
                text = raw.decode("utf8")
            except UnicodeDecodeError as err:
                text = raw.decode("utf8", errors="replace")
                if problems is not None:
                    problems(
                        "bad_utf8", line_no, sentence(),
                        f"invalid UTF-8 ({err.reason} at byte {err.start} of the line): expected "
                        f"UTF-8 text, got {raw[max(0, err.start - 6):err.end + 6]!r}; re-encode "
                        f"the file (e.g. iconv -f GB18030 -t UTF-8)",
                        "replace the bad bytes with U+FFFD",
                    )
            yield line_no, text


def _iter_tags(path: Path, format: str) -> Iterator[str]:
    """Yield the tag column of a chars file, leniently, for scheme detection."""
    for _, text in _iter_lines(path, problems=None):
        columns = _COLUMN_SEP.split(text.strip(" \t"))
        if len(columns) >= 2:
            yield columns[-1]


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    """Raise a ValueError if `value` is not one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"{name}: expected one of {', '.join(choices)}, got {value!r}. Pick one of these, "
            f"or convert the file to a supported format first."
        )


def _preview(text: str, width: int = 60) -> str:
    """Shorten text for an error message."""
    return repr(text if len(text) <= width else text[: width - 3] + "...")
