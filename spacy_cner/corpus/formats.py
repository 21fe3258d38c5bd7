"""The one table of corpus formats: each one's usual suffix, how a file of it is recognised, read and
written. `convert`, `export`, `select` and the CLI's choices take their formats from here: a new
format is a module beside this one (its reader and writer, as doccano.py) and a row of FORMATS."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

from .chars import DOCSTART, SEG_DIGITS, read_sentences, split_last_field, write_tagged
from .cluener import is_cluener, read_cluener, write_cluener
from .doccano import is_doccano, read_doccano, write_doccano
from .labelstudio import is_labelstudio, read_labelstudio, write_labelstudio
from .problems import read_lines
from .prodigy import is_prodigy, read_prodigy, write_prodigy


@dataclass(frozen=True)
class Format:
    """One corpus format.

    name (str): What --format calls it.
    suffix (str): The usual suffix of its files.
    tags (bool): One token and its tag per line (chars.py): read by `read` (chars.read_sentences)
        and written a doc at a time by `write(doc, index, scheme) -> lines`. Otherwise JSON records,
        a text and its entities' character offsets: `read(record, line, sentence, problems)` gives
        the text and its candidate spans, `write(AnnotatedText) -> record`.
    detect (Optional[Callable[[Any], bool]]): JSON formats: whether the first JSON value of a file
        (its first line's, or the whole file's where it starts with "[") is of this format.
    read (Callable): The reader (see tags).
    write (Optional[Callable]): The writer (see tags); None: not written.
    array (bool): The file is one JSON array of records (Label Studio's), not JSON lines.
    tool (Optional[str]): The annotation tool whose format it is, which `select` writes for.
    """

    name: str
    suffix: str
    tags: bool
    detect: Optional[Callable[[Any], bool]]
    read: Callable
    write: Optional[Callable]
    array: bool = False
    tool: Optional[str] = None


_TABLE = (
    Format("chars", ".txt", True, None, read_sentences, write_tagged),
    Format("chars-seg", ".txt", True, None, read_sentences, None),
    Format("cluener", ".json", False, is_cluener, read_cluener, write_cluener),
    Format("doccano", ".jsonl", False, is_doccano, read_doccano, write_doccano, tool="doccano"),
    Format("prodigy", ".jsonl", False, is_prodigy, read_prodigy, write_prodigy, tool="Prodigy"),
    Format(
        "labelstudio",
        ".json",
        False,
        is_labelstudio,
        read_labelstudio,
        write_labelstudio,
        array=True,
        tool="Label Studio",
    ),
)
FORMATS: Dict[str, Format] = {fmt.name: fmt for fmt in _TABLE}
# An annotation tool's JSON: a text and its entities' offsets (the others: one token per line).
OFFSET_FORMATS = tuple(name for name, fmt in FORMATS.items() if not fmt.tags)
# What `convert` reads, `export` writes, and `select` writes its texts for.
READ_FORMATS = tuple(FORMATS)
WRITE_FORMATS = tuple(name for name, fmt in FORMATS.items() if fmt.write is not None)
TOOL_FORMATS = tuple(name for name, fmt in FORMATS.items() if fmt.tool is not None)

# How many token lines the format sniffer looks at before deciding chars vs chars-seg.
_SNIFF_LINES = 50


def detect_format(path: Union[str, Path]) -> str:
    """Guess the input format from the first lines of a file.

    path (Union[str, Path]): The input file.
    RETURNS (str): For a first non-empty line that is JSON, the format whose `detect` takes it:
        "cluener" (an object with a "label" object or none), "doccano" (a "label" or "entities"
        list), "prodigy" ("spans"), "labelstudio" (a file that is one JSON array of tasks); else
        "chars-seg" if every token looks like a character followed by a word-position number (科0,
        s15), else "chars". A chars file whose first character is `{` or `[` stays "chars": only
        JSON that parses counts.
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
            parsed, value = _first_json_value(path, text)
            if parsed:
                for fmt in _TABLE:
                    if fmt.detect is not None and fmt.detect(value):
                        return fmt.name
        if text.startswith(DOCSTART):
            continue
        fields = split_last_field(text.rstrip(" \t"))
        n_seen += 1
        n_seg += fields is not None and SEG_DIGITS.match(fields[0]) is not None
        if n_seen >= _SNIFF_LINES:
            break
    return "chars-seg" if n_seen and n_seg == n_seen else "chars"


def _first_json_value(path: Path, first_line: str) -> Tuple[bool, Any]:
    """(True, the JSON value) of a file's first non-empty line (of the whole file where that line
    starts with "["), or (False, None) where it is not JSON."""
    stripped = first_line.strip()
    try:
        if stripped.startswith("["):
            return True, json.loads(path.read_text(encoding="utf8", errors="replace").lstrip("\ufeff"))
        if stripped.startswith("{"):
            return True, json.loads(stripped)
    except json.JSONDecodeError:
        pass
    return False, None
