"""Strict reading shared by the corpus readers: every problem raises naming file and line, or, with
repair, is repaired and listed; the conversion's counts; lines read with BOM and CRLF accepted."""
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence, Tuple




REPAIR_OPTION = "--repair (repair=True)"


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


def read_lines(
    path: Path, problems: Optional[Problems], sentence: Callable[[], int] = lambda: 0
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
