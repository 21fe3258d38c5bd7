"""One token per line with its tag (`chars`, and Weibo's `chars-seg`): sentences, tag schemes
(BIO, IOB, BMES, BIOES) decoded into entities strictly, or repaired and listed; and a Doc written
back as `token<TAB>tag` lines (`chars`)."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.tokens import Doc

from ..tags import SCHEME_NAMES, SCHEME_PREFIXES, Entity, spans_to_tags, split_tag
from .problems import Problems, Repair, read_lines


# One token per line: `char tag`, and Weibo's `科0 tag` (a word position after the character).
TAG_FORMATS = ("chars", "chars-seg")


_COLUMN_SEP = re.compile(r"[ \t]+")


# The tag: the last field of a line, after the last run of spaces/tabs.
_LAST_FIELD = re.compile(r"^(?P<before>.*?)(?P<sep>[ \t]+)(?P<tag>[^ \t]+)$", re.DOTALL)


SEG_DIGITS = re.compile(r"^(?P<char>.+?)(?P<position>[0-9]{1,2})$", re.DOTALL)


DOCSTART = "-DOCSTART-"


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
    problems: Optional[Problems] = None,
) -> Iterator[Sentence]:
    """Stream the sentences of a one-token-per-line file, line by line.

    path (Union[str, Path]): The input file (UTF-8, BOM and CRLF accepted).
    format (str): "chars" (`char tag`) or "chars-seg" (`char+digit tag`, as in Weibo NER).
    repair (bool): Repair malformed lines instead of raising (ignored if `problems` is given).
    YIELDS (Sentence): The non-empty sentences, in file order.
    """
    path = Path(path)
    problems = reader_problems(
        "read_sentences", path, format, TAG_FORMATS, repair, problems, "Use read_offset_records for JSON records."
    )
    index = 0
    tokens: List[str] = []
    tags: List[str] = []
    lines: List[int] = []
    for line_no, text in read_lines(path, problems=problems, sentence=lambda: index):
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


def reader_problems(
    reader: str, path: Path, format: str, formats: Sequence[str], repair: bool, problems: Optional[Problems], hint: str
) -> Problems:
    """The problem log a reader reports to (a new one unless given), or a ValueError if the
    format is not one the reader reads."""
    if format not in formats:
        raise ValueError(f"format for {reader}: expected one of {', '.join(formats)}, got {format!r}. {hint}")
    return problems if problems is not None else Problems(str(path), repair, [])


def split_last_field(text: str) -> Optional[Tuple[str, str]]:
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
    text: str, format: str, line_no: int, index: int, problems: Problems
) -> Optional[Tuple[str, str]]:
    """(token, tag) of one non-blank line without trailing spaces/tabs; None to drop it."""
    fields = split_last_field(text)
    if fields is None:
        problems(
            "missing_tag",
            line_no,
            index,
            f"line {text!r} has no tag: expected `char<space or tab>tag`, got 1 column",
            "tag it O",
        )
        fields = (text, "O")
    token, tag = fields
    if not token:
        problems(
            "missing_token",
            line_no,
            index,
            f"line {text!r} has a tag but no character before it: expected `char<space or "
            f"tab>tag` (a space as the character is written `<space><tab>tag`)",
            "drop the line (it holds no text)",
        )
        return None
    columns = _COLUMN_SEP.split(token.strip(" \t"))
    if len(columns) > 1:
        problems(
            "extra_columns",
            line_no,
            index,
            f"line {text!r} has {len(columns) + 1} columns: expected 2 (`char tag`)",
            f"keep the first and the last column ({columns[0]!r}, {tag!r})",
        )
        token = columns[0]
    tag = clean_tag(tag, line_no, index, problems)
    if format == "chars-seg":
        token = _strip_seg_digits(token, line_no, index, problems)
    if len(token) > 1:
        problems.note(
            "multi_char_token",
            line_no,
            index,
            f"token {token!r} has {len(token)} code points: kept whole as one token",
        )
    return token, tag


def clean_tag(tag: str, line: int, sentence: int, problems: Problems, what: str = "tag") -> str:
    """The tag (or label) without invisible characters (NBSP, \\x0b, zero-width space...)."""
    invisible = [char for char in tag if char.isspace() or not char.isprintable()]
    if not invisible:
        return tag
    cleaned = "".join(char for char in tag if char not in invisible)
    problems(
        f"invisible_in_{what}",
        line,
        sentence,
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
    spans = decode_checked(tags, scheme, lines, sentence, Problems(path, repair, repairs))
    return spans, repairs


def decode_checked(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: Problems
) -> List[Entity]:
    """Decode tags with `problems` deciding between raising and repairing."""
    if scheme in ("bmes", "bioes"):
        return _decode_bmes(tags, scheme, lines, sentence, problems)
    return _decode_bio(tags, scheme, lines, sentence, problems)


def _before(tags: Sequence[str], i: int) -> str:
    """What comes before tag i, for an error message."""
    return "the start of the sentence" if i == 0 else tags[i - 1]


def _missing_opening(
    problems: Problems,
    tags: Sequence[str],
    i: int,
    middle: str,
    label: str,
    lines: Sequence[int],
    sentence: int,
    hint: str = "",
) -> None:
    """Report (or repair, opening an entity at i) a continuation tag with no entity to continue."""
    problems(
        "missing_opening",
        lines[i],
        sentence,
        f"{tags[i]} has no opening tag: expected B-{label} or {middle}-{label} before it, got {_before(tags, i)}{hint}",
        f"open a new {label} entity here",
    )


def _decode_bio(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: Problems
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
                    "type_mismatch",
                    lines[i],
                    sentence,
                    f"{tag} continues an entity of another type: expected I-{spans[-1][2]}, "
                    f"O or a B- tag after {tags[i - 1]}",
                    f"end the {spans[-1][2]} entity and open a new {tag_label} entity here",
                )
            else:
                _missing_opening(
                    problems, tags, i, "I", tag_label, lines, sentence, " (if the file is IOB1, use --scheme iob)"
                )
        elif prefix == "B" and scheme == "iob" and not continues:
            problems(
                "iob1_b_opening",
                lines[i],
                sentence,
                f"{tag} in IOB1 must directly follow a {tag_label} entity: expected I-{tag_label} "
                f"to open an entity after {_before(tags, i)} (if the file is IOB2, use --scheme bio)",
                f"open a new {tag_label} entity here",
            )
        start, label = i, tag_label
    if start is not None:
        spans.append((start, len(tags), label))
    return spans


def _decode_bmes(
    tags: Sequence[str], scheme: str, lines: Sequence[int], sentence: int, problems: Problems
) -> List[Entity]:
    """Decode BMES or BIOES tags; every B- must be closed by an E- of the same type."""
    middle = "M" if scheme == "bmes" else "I"
    spans: List[Entity] = []
    start: Optional[int] = None
    label = ""

    def close_unclosed(i: int, got: str) -> None:
        last = i - 1
        problems(
            "unclosed_entity",
            lines[last],
            sentence,
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
                "type_mismatch",
                lines[i],
                sentence,
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


def _split_tag(tag: str, scheme: str, line: int, sentence: int, problems: Problems) -> Tuple[str, str]:
    """Split a tag into (prefix, label); unknown tags are problems repaired as O."""
    if tag == "O":
        return "O", ""
    allowed = SCHEME_PREFIXES[scheme]
    prefix, sep, _ = tag.partition("-")
    if sep and prefix in allowed:
        try:
            return split_tag(tag)
        except ValueError:
            pass
    expected = ", ".join(f"{p}-TYPE" for p in allowed) + " or O"
    if sep and prefix in allowed:
        reason = f"tag {tag!r} has an empty entity type"
    else:
        reason = f"tag {tag!r} has an unknown prefix for {SCHEME_NAMES[scheme]}"
    problems(
        "unknown_tag",
        line,
        sentence,
        f"{reason}: expected {expected} (the types follow a '-'); pick the file's scheme with "
        f"--scheme {{bio,iob,bmes,bioes}} if it is another",
        "tag it O",
    )
    return "O", ""


def _strip_seg_digits(token: str, line: int, sentence: int, problems: Problems) -> str:
    """The character of a chars-seg token: everything before its 1-2 position digits.

    `科0` -> 科, `s15` -> s (position 15 of a long Latin word), `115` -> 1 (the digit 1 at
    position 15), `\ufffd\ufffd0` -> both U+FFFD (a multi-code-point character is kept whole).
    """
    if len(token) > 1 and token.isdigit() and token.isascii():
        return token[0]
    match = SEG_DIGITS.match(token)
    if match is not None:
        return match.group("char")
    problems(
        "bad_token",
        line,
        sentence,
        f"token {token!r} is not a character followed by a word-position number: expected "
        f"e.g. '科0' or 's15' (format chars-seg; use --format chars if the file has no digits)",
        f"keep the token {token!r} as it is",
    )
    return token


def iter_tags(path: Path, format: str) -> Iterator[str]:
    """Yield the tag column of a chars file, leniently, for scheme detection."""
    for _, text in read_lines(path, problems=None):
        fields = split_last_field(text.rstrip(" \t"))
        if fields is not None and fields[0] and not text.startswith(DOCSTART):
            yield fields[1]


def write_tagged(doc: Doc, index: int, scheme: str) -> str:
    """A doc as `token<TAB>tag` lines and a blank line, tagged in scheme ("bioes", "bio" or "bmes").

    doc (Doc): The doc, with entity annotation; doc index is named "doc index" in errors.
    RETURNS (str): Its lines, each with its line ending.
    """
    if not doc.has_annotation("ENT_IOB"):
        raise ValueError(
            f"doc {index} has no entity annotation (ENT_IOB unset): a `token tag` file cannot "
            f"say 'missing'. Export as cluener or doccano, which leave its label out."
        )
    units = _units(doc)
    for text, _, _ in units:
        if "\n" in text or "\r" in text:
            raise ValueError(
                f"doc {index}: the token {text!r} holds a line break, which a one-token-per-line "
                f"file cannot hold. Export as cluener or doccano."
            )
    starts = {start: i for i, (_, start, _) in enumerate(units)}
    ends = {end: i + 1 for i, (_, _, end) in enumerate(units)}
    spans = [(starts[ent.start_char], ends[ent.end_char], ent.label_) for ent in doc.ents]
    tags = spans_to_tags(spans, len(units), "BIO" if scheme == "bio" else "BIOES")
    if scheme == "bmes":
        tags = ["M" + tag[1:] if tag.startswith("I-") else tag for tag in tags]
    return "".join(f"{text}\t{tag}\n" for (text, _, _), tag in zip(units, tags)) + "\n"


def _units(doc: Doc) -> List[Tuple[str, int, int]]:
    """(text, start_char, end_char) of each token and of each token's trailing whitespace.

    Whitespace after a token (a word-segmented doc's spaces) becomes a line of its own, so the
    text survives the round trip; converted character docs have none.
    """
    units: List[Tuple[str, int, int]] = []
    for token in doc:
        units.append((token.text, token.idx, token.idx + len(token.text)))
        if token.whitespace_:
            end = token.idx + len(token.text)
            units.append((token.whitespace_, end, end + len(token.whitespace_)))
    return units
