"""JSON files of records, streamed: one object per line (JSON lines) or an array of objects (a Label
Studio export), read each with the line it starts on, for error messages, and written."""

import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, TextIO, Tuple

from .problems import Problems, preview, read_lines


def iter_json_lines(path: Path, problems: Problems, sentence: Callable[[], int]) -> Iterator[Tuple[int, dict]]:
    """Yield (line, record) for each JSON object line; bad lines are problems."""
    for line_no, text in read_lines(path, problems=problems, sentence=sentence):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            problems(
                "invalid_json",
                line_no,
                sentence(),
                f"invalid JSON ({err.msg} at column {err.colno}): expected one JSON object per "
                f"line, got {preview(text)}",
                "drop this line",
            )
            continue
        if not isinstance(record, dict):
            problems(
                "invalid_record",
                line_no,
                sentence(),
                f"expected a JSON object, got {type(record).__name__} {preview(text)}",
                "drop this line",
            )
            continue
        yield line_no, record


def iter_json_array(path: Path, problems: Problems) -> Iterator[Tuple[int, dict]]:
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
            "bad_utf8",
            line,
            0,
            f"invalid UTF-8 ({err.reason}): expected UTF-8 text, got "
            f"{raw[max(0, err.start - 6) : err.end + 6]!r}; re-encode the file",
            "replace the bad bytes with U+FFFD",
        )
        text = raw.decode("utf8", errors="replace").lstrip("\ufeff")
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        raise ValueError(
            f"{path}:1: expected a Label Studio JSON export (a JSON array of tasks), got "
            f"{preview(text[pos : pos + 40])}. Export the project as JSON from Label Studio."
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
                "invalid_record",
                line,
                0,
                f"expected a task object, got {type(task).__name__}",
                "drop this task",
            )
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)


def _skip_space(text: str, pos: int) -> int:
    """The first position at or after pos that is not JSON whitespace."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def write_json_records(records: Iterable[Dict[str, Any]], file: TextIO, array: bool = False) -> None:
    """Write records as JSON lines, one streamed at a time, or as one JSON array (a Label Studio
    import, indented one space a level), non-ASCII characters as they are."""
    if array:
        file.write(json.dumps(list(records), ensure_ascii=False, indent=1) + "\n")
        return
    for record in records:
        file.write(json.dumps(record, ensure_ascii=False) + "\n")
