"""Readers that turn Chinese NER corpora into character-level spaCy Docs."""
import json
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from ..tags import Entity

# chars-style formats (one token per line) and annotation-tool formats (text + offsets)
TAG_FORMATS = ("chars", "chars-seg")
OFFSET_FORMATS = ("cluener", "doccano", "prodigy", "labelstudio")
FORMATS = ("auto",) + TAG_FORMATS + OFFSET_FORMATS
INPUT_SCHEMES = ("auto", "bio", "iob", "bmes", "bioes")
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
# The tag: the last field of a line, after the last run of spaces/tabs.
_LAST_FIELD = re.compile(r"^(?P<before>.*?)(?P<sep>[ \t]+)(?P<tag>[^ \t]+)$", re.DOTALL)
_SEG_DIGITS = re.compile(r"^(?P<char>.+?)(?P<position>[0-9]{1,2})$", re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
DOCSTART = "-DOCSTART-"
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
    # Things worth knowing that changed nothing (multi-character tokens, skipped -DOCSTART-
    # lines, rejected Prodigy answers): kept out of `repairs`, as strict mode accepts them.
    notes: List[Repair] = field(default_factory=list)

    @property
    def note_counts(self) -> Counter:
        """Number of notes per kind."""
        return Counter(note.kind for note in self.notes)

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

    def __init__(
        self, path: str, repair: bool, repairs: List[Repair], notes: Optional[List[Repair]] = None
    ) -> None:
        self.path = path
        self.repair = repair
        self.repairs = repairs
        self.notes = [] if notes is None else notes

    def note(self, kind: str, line: int, sentence: int, message: str) -> None:
        """Record something the report should mention but that is not a problem."""
        self.notes.append(Repair(kind, line, sentence, message))

    def __call__(self, kind: str, line: int, sentence: int, message: str, fix: str) -> None:
        if not self.repair:
            raise ValueError(
                f"{self.path}:{line}: {message}. Fix the file, or rerun with "
                f"{REPAIR_OPTION} to {fix}."
            )
        self.repairs.append(Repair(kind, line, sentence, f"{message}; repaired: {fix}"))


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
    _check_choice("scheme", scheme, INPUT_SCHEMES)
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
    problems = _Problems(str(path), repair, stats.repairs, stats.notes)
    if format in OFFSET_FORMATS:
        if scheme != "auto":
            raise ValueError(
                f"--scheme for {path}: expected 'auto' with format {format} (its spans carry "
                f"offsets, not tags), got {scheme!r}. Drop --scheme."
            )
        for tokens, spans in read_offset_records(path, format, problems=problems):
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
    RETURNS (str): For a first non-empty line that is a JSON object: "cluener" (a "label"
        object), "doccano" (a "label" or "entities" list), "prodigy" ("spans"); "labelstudio"
        for a file that is one JSON array of tasks; else "chars-seg" if every token looks like
        a character followed by a word-position number (科0, s15), else "chars". A chars file
        whose first character is `{` or `[` stays "chars": only JSON that parses counts.
    """
    path = Path(path)
    n_seen = 0
    n_seg = 0
    for _, text in _iter_lines(path, problems=None):
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
        fields = _split_last_field(text.rstrip(" \t"))
        n_seen += 1
        n_seg += fields is not None and _SEG_DIGITS.match(fields[0]) is not None
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
    problems = _reader_problems("read_sentences", path, format, TAG_FORMATS, repair, problems,
                                "Use read_offset_records for JSON records.")
    index = 0
    tokens: List[str] = []
    tags: List[str] = []
    lines: List[int] = []
    for line_no, text in _iter_lines(path, problems=problems, sentence=lambda: index):
        text = text.rstrip(" \t")
        if not text.strip(" \t"):
            if tokens:
                yield Sentence(index, tokens, tags, lines)
                index += 1
                tokens, tags, lines = [], [], []
            continue
        if text.startswith(DOCSTART):
            problems.note("docstart", line_no, index, f"skipped the line {text!r}")
            continue
        parsed = _parse_token_line(text, format, line_no, index, problems)
        if parsed is None:
            continue
        token, tag = parsed
        tokens.append(token)
        tags.append(tag)
        lines.append(line_no)
    if tokens:
        yield Sentence(index, tokens, tags, lines)


def _reader_problems(
    reader: str, path: Path, format: str, formats: Sequence[str], repair: bool, problems: Optional[_Problems], hint: str
) -> _Problems:
    """The problem log a reader reports to (a new one unless given), or a ValueError if the
    format is not one the reader reads."""
    if format not in formats:
        raise ValueError(f"format for {reader}: expected one of {', '.join(formats)}, got {format!r}. {hint}")
    return problems if problems is not None else _Problems(str(path), repair, [])


def _split_last_field(text: str) -> Optional[Tuple[str, str]]:
    """Split a token line at its last run of spaces/tabs: (token, tag), or None if it has none.

    The token may itself be a space (` \tO`, `  O`) or another blank (U+3000, U+00A0): when
    nothing but spaces/tabs comes before the tag, the token is that run less its last
    character, the separator.
    """
    match = _LAST_FIELD.match(text)
    if match is None:
        return None
    before, sep, tag = match.group("before", "sep", "tag")
    if before:
        return before, tag
    return sep[:-1], tag


def _parse_token_line(
    text: str, format: str, line_no: int, index: int, problems: _Problems
) -> Optional[Tuple[str, str]]:
    """(token, tag) of one non-blank line without trailing spaces/tabs; None to drop it."""
    fields = _split_last_field(text)
    if fields is None:
        problems(
            "missing_tag", line_no, index,
            f"line {text!r} has no tag: expected `char<space or tab>tag`, got 1 column",
            "tag it O",
        )
        fields = (text, "O")
    token, tag = fields
    if not token:
        problems(
            "missing_token", line_no, index,
            f"line {text!r} has a tag but no character before it: expected `char<space or "
            f"tab>tag` (a space as the character is written `<space><tab>tag`)",
            "drop the line (it holds no text)",
        )
        return None
    columns = _COLUMN_SEP.split(token.strip(" \t"))
    if len(columns) > 1:
        problems(
            "extra_columns", line_no, index,
            f"line {text!r} has {len(columns) + 1} columns: expected 2 (`char tag`)",
            f"keep the first and the last column ({columns[0]!r}, {tag!r})",
        )
        token = columns[0]
    tag = _clean_tag(tag, line_no, index, problems)
    if format == "chars-seg":
        token = _strip_seg_digits(token, line_no, index, problems)
    if len(token) > 1:
        problems.note(
            "multi_char_token", line_no, index,
            f"token {token!r} has {len(token)} code points: kept whole as one token",
        )
    return token, tag


def _clean_tag(
    tag: str, line: int, sentence: int, problems: _Problems, what: str = "tag"
) -> str:
    """The tag (or label) without invisible characters (NBSP, \\x0b, zero-width space...)."""
    invisible = [char for char in tag if char.isspace() or not char.isprintable()]
    if not invisible:
        return tag
    cleaned = "".join(char for char in tag if char not in invisible)
    problems(
        f"invisible_in_{what}", line, sentence,
        f"{what} {tag!r} contains invisible characters {''.join(invisible)!r}: expected a "
        f"{what} of visible characters only",
        f"remove them, keeping the {what} {cleaned or 'O'!r}",
    )
    return cleaned or "O"


def decode_tags(
    tags: Sequence[str],
    scheme: str,
    repair: bool = False,
    lines: Optional[Sequence[int]] = None,
    path: str = "<tags>",
    sentence: int = 0,
) -> Tuple[List[Entity], List[Repair]]:
    """Turn one sentence's tags into entity spans, checking that they are well formed.

    tags (Sequence[str]): One tag per token, e.g. ["B-ORG", "M-ORG", "E-ORG", "O"].
    scheme (str): "bio", "iob", "bmes" or "bioes".
    repair (bool): Repair malformed tags and report each repair instead of raising.
    lines (Optional[Sequence[int]]): The 1-based line of each tag, for messages.
    path (str): The file name, for messages.
    sentence (int): The 0-based sentence index, for the repair records.
    RETURNS (Tuple[List[Entity], List[Repair]]): (start, end, label) spans with an exclusive
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


def read_offset_records(
    path: Union[str, Path],
    format: str = "cluener",
    repair: bool = False,
    problems: Optional[_Problems] = None,
) -> Iterator[Tuple[List[str], Optional[List[Entity]]]]:
    """Stream the records of an annotation-tool file as characters and checked entity spans.

    path (Union[str, Path]): The input file.
    format (str): "cluener" (JSON lines `{"text", "label": {type: {surface: [[s, e], ...]}}}`,
        `e` inclusive), "doccano" (JSON lines `{"text", "label": [[s, e, type], ...]}` or
        `"entities": [{"start_offset", "end_offset", "label"}]`), "prodigy" (JSON lines
        `{"text", "spans": [{"start", "end", "label"}], "answer"}`) or "labelstudio" (a JSON
        export: `[{"data": {"text"}, "annotations": [{"result": [{"value": {"start", "end",
        "labels"}}]}]}]`). Offsets are characters, the end exclusive unless said otherwise.
    repair (bool): Drop bad records and spans and report them instead of raising (ignored if
        `problems` is given).
    YIELDS (Tuple[List[str], Optional[List[Entity]]]): The characters and the spans (exclusive
        end, sorted), or None when the record carries no annotation (e.g. a test set).
    """
    path = Path(path)
    problems = _reader_problems("read_offset_records", path, format, OFFSET_FORMATS, repair, problems,
                                "Use read_sentences for one-token-per-line files.")
    index = 0
    read_record = _RECORD_READERS[format]
    records = (
        _iter_json_array(path, problems)
        if format == "labelstudio"
        else _iter_json_lines(path, problems, lambda: index)
    )
    for line_no, record in records:
        parsed = read_record(record, line_no, index, problems)
        if parsed is None:
            continue
        text, candidates = parsed
        text = _replace_surrogates(text, line_no, index, problems)
        spans = None
        if candidates is not None:
            checked = [_check_span(text, *span, line_no, index, problems) for span in candidates]
            spans = _resolve_overlaps(
                text, [span for span in checked if span is not None], line_no, index, problems
            )
        yield list(text), spans
        index += 1


def _decode(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[Entity]:
    """Decode tags with `problems` deciding between raising and repairing."""
    if scheme in ("bmes", "bioes"):
        return _decode_bmes(tags, scheme, lines, sentence, problems)
    return _decode_bio(tags, scheme, lines, sentence, problems)


def _before(tags: Sequence[str], i: int) -> str:
    """What comes before tag i, for an error message."""
    return "the start of the sentence" if i == 0 else tags[i - 1]


def _missing_opening(
    problems: _Problems, tags: Sequence[str], i: int, middle: str, label: str, lines: Sequence[int], sentence: int,
    hint: str = "",
) -> None:
    """Report (or repair, opening an entity at i) a continuation tag with no entity to continue."""
    problems(
        "missing_opening", lines[i], sentence,
        f"{tags[i]} has no opening tag: expected B-{label} or {middle}-{label} before it, got {_before(tags, i)}{hint}",
        f"open a new {label} entity here",
    )


def _decode_bio(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[Entity]:
    """Decode BIO (IOB2) or IOB (IOB1) tags."""
    spans: List[Entity] = []
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
                _missing_opening(problems, tags, i, "I", tag_label, lines, sentence, " (if the file is IOB1, use --scheme iob)")
        elif prefix == "B" and scheme == "iob" and not continues:
            problems(
                "iob1_b_opening", lines[i], sentence,
                f"{tag} in IOB1 must directly follow a {tag_label} entity: expected I-{tag_label} "
                f"to open an entity after {_before(tags, i)} (if the file is IOB2, use --scheme bio)",
                f"open a new {tag_label} entity here",
            )
        start, label = i, tag_label
    if start is not None:
        spans.append((start, len(tags), label))
    return spans


def _decode_bmes(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: _Problems
) -> List[Entity]:
    """Decode BMES or BIOES tags; every B- must be closed by an E- of the same type."""
    middle = "M" if scheme == "bmes" else "I"
    spans: List[Entity] = []
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
            _missing_opening(problems, tags, i, middle, tag_label, lines, sentence)
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


def _strip_seg_digits(token: str, line: int, sentence: int, problems: _Problems) -> str:
    """The character of a chars-seg token: everything before its 1-2 position digits.

    `科0` -> 科, `s15` -> s (position 15 of a long Latin word), `115` -> 1 (the digit 1 at
    position 15), `\ufffd\ufffd0` -> both U+FFFD (a multi-code-point character is kept whole).
    """
    if len(token) > 1 and token.isdigit() and token.isascii():
        return token[0]
    match = _SEG_DIGITS.match(token)
    if match is not None:
        return match.group("char")
    problems(
        "bad_token", line, sentence,
        f"token {token!r} is not a character followed by a word-position number: expected "
        f"e.g. '科0' or 's15' (format chars-seg; use --format chars if the file has no digits)",
        f"keep the token {token!r} as it is",
    )
    return token


# (label, start, end exclusive, surface or None, description for messages)
_CandidateSpan = Tuple[str, int, int, Optional[str], str]


def _iter_json_lines(
    path: Path, problems: _Problems, sentence: Callable[[], int]
) -> Iterator[Tuple[int, dict]]:
    """Yield (line, record) for each JSON object line; bad lines are problems."""
    for line_no, text in _iter_lines(path, problems=problems, sentence=sentence):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            problems(
                "invalid_json", line_no, sentence(),
                f"invalid JSON ({err.msg} at column {err.colno}): expected one JSON object per "
                f"line, got {_preview(text)}",
                "drop this line",
            )
            continue
        if not isinstance(record, dict):
            problems(
                "invalid_record", line_no, sentence(),
                f"expected a JSON object, got {type(record).__name__} {_preview(text)}",
                "drop this line",
            )
            continue
        yield line_no, record


def _iter_json_array(path: Path, problems: _Problems) -> Iterator[Tuple[int, dict]]:
    """Yield (line where the task starts, task) for each object of a JSON array file.

    json.load would give the tasks but not their lines; raw_decode element by element keeps
    each task's position for error messages.
    """
    raw = path.read_bytes()
    try:
        text = raw.decode("utf8").lstrip("\ufeff")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        problems(
            "bad_utf8", line, 0,
            f"invalid UTF-8 ({err.reason}): expected UTF-8 text, got "
            f"{raw[max(0, err.start - 6):err.end + 6]!r}; re-encode the file",
            "replace the bad bytes with U+FFFD",
        )
        text = raw.decode("utf8", errors="replace").lstrip("\ufeff")
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        raise ValueError(
            f"{path}:1: expected a Label Studio JSON export (a JSON array of tasks), got "
            f"{_preview(text[pos:pos + 40])}. Export the project as JSON from Label Studio."
        )
    pos = _skip_space(text, pos + 1)
    line, counted = 1, 0
    while pos < len(text) and text[pos] != "]":
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            task, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path}:{err.lineno}: invalid JSON ({err.msg} at column {err.colno}): expected "
                f"a JSON array of tasks. Fix the file or export it again."
            ) from None
        if isinstance(task, dict):
            yield line, task
        else:
            problems(
                "invalid_record", line, 0,
                f"expected a task object, got {type(task).__name__}", "drop this task",
            )
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)


def _skip_space(text: str, pos: int) -> int:
    """The first position at or after pos that is not JSON whitespace."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _record_text(record: dict, line: int, sentence: int, problems: _Problems) -> Optional[str]:
    """The non-empty "text" of a record, or None (a problem) when it has none."""
    text = record.get("text")
    if not isinstance(text, str):
        problems(
            "invalid_record", line, sentence,
            f'record has no "text" string: expected {{"text": str, ...}}, got '
            f"text={_preview(repr(text))}",
            "drop this record",
        )
        return None
    if not text:
        problems(
            "empty_text", line, sentence,
            'empty "text": expected at least one character, got ""',
            "drop this record",
        )
        return None
    return text


def _read_cluener(record: dict, line: int, sentence: int, problems: _Problems):
    """CLUENER: "label" maps each type to {surface: [[start, end_inclusive], ...]}."""
    text = _record_text(record, line, sentence, problems)
    if text is None:
        return None
    label = record.get("label")
    if label is None:
        return text, None
    if not isinstance(label, dict):
        problems(
            "invalid_record", line, sentence,
            f'"label" is not an object: expected {{type: {{surface: [[start, end], ...]}}}}, '
            f"got {_preview(json.dumps(label, ensure_ascii=False))}",
            "drop the label and keep the sentence unannotated",
        )
        return text, None
    candidates: List[_CandidateSpan] = []
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
            for offset in offsets if isinstance(offsets, list) else [offsets]:
                where = f"{ent_type} {surface!r} at {json.dumps(offset)}"
                if not _is_int_pair(offset):
                    _invalid_span(problems, line, sentence, where, f"[start, end] with integer offsets, got {json.dumps(offset)}")
                    continue
                start, end = offset
                candidates.append((ent_type, start, end + 1, surface, where + " (end inclusive)"))
    return text, candidates


def _read_doccano(record: dict, line: int, sentence: int, problems: _Problems):
    """doccano: "label": [[start, end, type], ...] or "entities": [{start_offset, ...}]."""
    text = _record_text(record, line, sentence, problems)
    if text is None:
        return None
    if "entities" in record and not isinstance(record.get("label"), list):
        raw = [
            [ent.get("start_offset"), ent.get("end_offset"), ent.get("label")]
            if isinstance(ent, dict) else ent
            for ent in record["entities"] or []
        ]
    else:
        raw = record.get("label")
    if raw is None:
        return text, None
    def read(item) -> Optional[Tuple[str, int, int, Optional[str]]]:
        if isinstance(item, list) and len(item) == 3 and _is_int_pair(item[:2]) and isinstance(item[2], str):
            return item[2], item[0], item[1], None
        return None

    return text, _read_spans(raw, read, "[start, end, label] with integer offsets", line, sentence, problems)


def _read_prodigy(record: dict, line: int, sentence: int, problems: _Problems):
    """Prodigy: "spans": [{"start", "end", "label"}]; rejected or ignored answers skipped."""
    text = _record_text(record, line, sentence, problems)
    if text is None:
        return None
    answer = record.get("answer", "accept")
    if answer != "accept":
        problems.note("prodigy_not_accepted", line, sentence, f'skipped: "answer" is {answer!r}')
        return None
    spans = record.get("spans")
    if spans is None:
        return text, None
    def read(item) -> Optional[Tuple[str, int, int, Optional[str]]]:
        if isinstance(item, dict) and _is_int_pair([item.get("start"), item.get("end")]) and isinstance(item.get("label"), str):
            return item["label"], item["start"], item["end"], item.get("text")
        return None

    return text, _read_spans(spans, read, '{"start": int, "end": int, "label": str}', line, sentence, problems)


def _read_labelstudio(task: dict, line: int, sentence: int, problems: _Problems):
    """Label Studio: the task's first annotation that was not cancelled (a NER labels result)."""
    data = task.get("data")
    text = None
    if isinstance(data, dict):
        strings = [value for value in data.values() if isinstance(value, str)]
        text = data.get("text", strings[0] if len(strings) == 1 else None)
    text = _record_text({"text": text}, line, sentence, problems)
    if text is None:
        return None
    annotations = [
        annotation for annotation in task.get("annotations") or []
        if isinstance(annotation, dict) and not annotation.get("was_cancelled")
    ]
    if not annotations:
        return text, None
    if len(annotations) > 1:
        problems.note(
            "labelstudio_annotations", line, sentence,
            f"task {task.get('id')} has {len(annotations)} annotations: read the first",
        )
    candidates: List[_CandidateSpan] = []
    for result in annotations[0].get("result") or []:
        value = result.get("value") if isinstance(result, dict) else None
        if not isinstance(value, dict) or "labels" not in value:
            continue  # relations, choices, text areas: not entity spans
        labels = value.get("labels")
        where = f"task {task.get('id')} result {json.dumps(value, ensure_ascii=False)}"
        if not (_is_int_pair([value.get("start"), value.get("end")]) and isinstance(labels, list)
                and len(labels) == 1 and isinstance(labels[0], str)):
            _invalid_span(problems, line, sentence, where, '{"start": int, "end": int, "labels": [one label]}')
            continue
        start, end = _utf16_to_chars(text, value["start"], value["end"], value.get("text"))
        candidates.append((labels[0], start, end, value.get("text"), where))
    return text, candidates


def _read_spans(
    items: Any,
    read: Callable[[Any], Optional[Tuple[str, int, int, Optional[str]]]],
    expected: str,
    line: int,
    sentence: int,
    problems: _Problems,
) -> List[_CandidateSpan]:
    """The candidate spans of a record's span items (one item or a list): read(item) gives
    (label, start, end, surface text or None), or None for an item not of the expected form,
    which is reported (or dropped)."""
    candidates: List[_CandidateSpan] = []
    for item in items if isinstance(items, list) else [items]:
        where = f"span {json.dumps(item, ensure_ascii=False)}"
        span = read(item)
        if span is None:
            _invalid_span(problems, line, sentence, where, expected)
            continue
        candidates.append((*span, where))
    return candidates


def _invalid_span(problems: _Problems, line: int, sentence: int, where: str, expected: str) -> None:
    """Report (or repair, dropping it) a span a record reader cannot read."""
    problems("invalid_span", line, sentence, f"{where}: expected {expected}", "drop this span")


_RECORD_READERS = {
    "cluener": _read_cluener,
    "doccano": _read_doccano,
    "prodigy": _read_prodigy,
    "labelstudio": _read_labelstudio,
}


def _is_int_pair(values) -> bool:
    """Whether values is a list of two ints (bools excluded)."""
    return (
        isinstance(values, list)
        and len(values) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in values)
    )


def _utf16_to_chars(text: str, start: int, end: int, surface: Optional[str]) -> Tuple[int, int]:
    """Code point offsets for Label Studio offsets, which count UTF-16 units.

    Label Studio's front end measures offsets in JavaScript string units, so each character
    beyond U+FFFF counts twice. When a code point reading is the one that gives the surface
    text, it is kept (files written by other tools).
    """
    if not text or max(text) <= "\uffff":
        return start, end
    units = 0
    to_char: Dict[int, int] = {}
    for i, char in enumerate(text):
        to_char[units] = i
        units += 2 if char > "\uffff" else 1
    to_char[units] = len(text)
    if start not in to_char or end not in to_char:
        return start, end
    converted = to_char[start], to_char[end]
    if surface is None or text[converted[0]:converted[1]] == surface:
        return converted
    return start, end


def _replace_surrogates(text: str, line: int, sentence: int, problems: _Problems) -> str:
    """The text with lone surrogates (JSON "\\udcff") replaced by U+FFFD, as a problem."""
    if not _SURROGATE.search(text):
        return text
    found = sorted(set(_SURROGATE.findall(text)))
    problems(
        "lone_surrogate", line, sentence,
        f"text {_preview(text)} holds lone surrogates {''.join(found)!r}, which are not "
        f"characters and cannot be written as UTF-8: expected valid Unicode text",
        "replace each with U+FFFD (one character for one, so offsets stay right)",
    )
    return _SURROGATE.sub("\ufffd", text)


def _check_span(
    text: str, ent_type: str, start: int, end: int, surface: Optional[str], where: str,
    line: int, sentence: int, problems: _Problems,
) -> Optional[Entity]:
    """Check one span (exclusive end) against the text; None if it was dropped."""
    if not 0 <= start < end <= len(text):
        problems(
            "span_out_of_range", line, sentence,
            f"{where}: expected 0 <= start < end <= {len(text)} (text length, end exclusive), "
            f"got start={start}, end={end}",
            "drop this span",
        )
        return None
    if surface is not None and text[start:end] != _SURROGATE.sub("\ufffd", surface):
        problems(
            "surface_mismatch", line, sentence,
            f"{where}: expected text[{start}:{end}] == {surface!r}, got {text[start:end]!r}",
            "drop this span",
        )
        return None
    cleaned = _clean_tag(ent_type, line, sentence, problems, what="label")
    if cleaned == "O" or not cleaned:
        problems(
            "invalid_span", line, sentence, f"{where}: expected a label, got {ent_type!r}",
            "drop this span",
        )
        return None
    return start, end, cleaned


def _resolve_overlaps(
    text: str, spans: List[Entity], line: int, sentence: int, problems: _Problems
) -> List[Entity]:
    """Keep non-overlapping spans, longer first; each dropped span is a problem."""
    kept: List[Entity] = []
    taken: Dict[int, Entity] = {}
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
        fields = _split_last_field(text.rstrip(" \t"))
        if fields is not None and fields[0] and not text.startswith(DOCSTART):
            yield fields[1]


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
