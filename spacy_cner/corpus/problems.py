"""Strict reading shared by the corpus readers: every problem raises naming file and line, or, with
repair, is repaired and listed; the conversion's counts; lines read with BOM and CRLF accepted."""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, List, Optional, Sequence, Tuple


# What the messages tell the user to pass: the CLI's option (iter_docs and read_* take repair=True).
REPAIR_OPTION = "--repair"


_BOM = b"\xef\xbb\xbf"


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


class Problems:
    """Raises a ValueError for a problem, or records it as a Repair when repairing."""

    def __init__(self, path: str, repair: bool, repairs: List[Repair], notes: Optional[List[Repair]] = None) -> None:
        self.path = path
        self.repair = repair
        self.repairs = repairs
        self.notes = [] if notes is None else notes

    def note(self, kind: str, line: int, sentence: int, message: str) -> None:
        """Record something the report should mention but that is not a problem."""
        self.notes.append(Repair(kind, line, sentence, message))

    def __call__(self, kind: str, line: int, sentence: int, message: str, fix: str) -> None:
        if not self.repair:
            raise ValueError(f"{self.path}:{line}: {message}. Fix the file, or rerun with {REPAIR_OPTION} to {fix}.")
        self.repairs.append(Repair(kind, line, sentence, f"{message}; repaired: {fix}"))


def iter_lines(file: BinaryIO) -> Iterator[bytes]:
    """Each line of a binary file without its line break ("\\n" or "\\r\\n"); no other character splits
    lines; a UTF-8 byte-order mark at the start is dropped.

    Why not text mode or str.splitlines: they also split at a lone "\\r", U+2028 and other separators,
    which a doc may contain; one doc per line means one per "\\n" here, in every reader.
    """
    for number, line in enumerate(file):
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        if number == 0 and line.startswith(_BOM):  # a UTF-8 byte-order mark is no part of the text
            line = line[len(_BOM) :]
        yield line


def read_lines(
    path: Path, problems: Optional[Problems], sentence: Callable[[], int] = lambda: 0
) -> Iterator[Tuple[int, str]]:
    """Yield (1-based line number, text) of iter_lines' lines, decoded; BOM and CRLF accepted, and
    any "\\r" left at a line's end dropped too. Bytes that are not UTF-8 are a problem (line-numbered)."""
    with path.open("rb") as file_:
        for line_no, raw in enumerate(iter_lines(file_), start=1):
            raw = raw.rstrip(b"\r")
            try:
                text = raw.decode("utf8")
            except UnicodeDecodeError as err:
                text = raw.decode("utf8", errors="replace")
                if problems is not None:
                    problems(
                        "bad_utf8",
                        line_no,
                        sentence(),
                        f"invalid UTF-8 ({err.reason} at byte {err.start} of the line): expected "
                        f"UTF-8 text, got {raw[max(0, err.start - 6) : err.end + 6]!r}; re-encode "
                        f"the file (e.g. iconv -f GB18030 -t UTF-8)",
                        "replace the bad bytes with U+FFFD",
                    )
            yield line_no, text


def check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    """Raise a ValueError if `value` is not one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"{name}: expected one of {', '.join(choices)}, got {value!r}. Pick one of these, "
            f"or convert the file to a supported format first."
        )


def preview(text: str, width: int = 60) -> str:
    """Shorten text for an error message."""
    return repr(text if len(text) <= width else text[: width - 3] + "...")
