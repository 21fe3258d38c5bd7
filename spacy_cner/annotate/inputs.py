"""The inputs of annotate: which files (a file, a folder, a glob), and their rows as Row objects.

Text files hold a doc per line; JSONL a `text` field per line; Parquet, CSV and TSV a `text` column
(--text-column names another). A row that cannot be annotated (not UTF-8, not JSON, no text, not a
string) is a Row with an error, never a stopped job: it is written out with its file and line.
"""

import csv
import dataclasses
import glob
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional

from ..corpus.problems import iter_lines

INPUT_FORMATS = {
    ".txt": "txt",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
}
# The formats whose rows have columns, the text in one of them (--text-column).
TABLE_FORMATS = ("jsonl", "parquet", "csv", "tsv")


@dataclasses.dataclass
class Source:
    """One input file and where its shards go."""

    path: Path
    format: str  # one of INPUT_FORMATS' values: "txt", "jsonl", "parquet", "csv" or "tsv"
    name: str  # the path relative to the input root, without its suffix: names the output shards

    def where(self, row_index: int) -> str:
        """Row `row_index` (0-based) of this file as an error names it: "path, line N" or "path, row N"."""
        unit = "line" if self.format in ("txt", "jsonl") else "row"
        return f"{self.path}, {unit} {row_index + 1}"


@dataclasses.dataclass
class Row:
    """One input row: the fields carried to the output, the text to annotate, or why it cannot be."""

    fields: Dict[str, Any]
    text: str = ""
    error: Optional[str] = None


def find_sources(input_path: str, input_format: str = "auto") -> List[Source]:
    """The input files, sorted, each with its format and output name.

    input_path (str): A file, a folder (searched recursively) or a glob pattern.
    input_format (str): "auto" (by suffix), "txt", "jsonl", "parquet", "csv" or "tsv".
    RETURNS (List[Source]): The files in a stable order.
    """
    if input_format != "auto" and input_format not in INPUT_FORMATS.values():
        raise ValueError(
            f"Unknown input format {input_format!r}: expected 'auto' or one of {sorted(set(INPUT_FORMATS.values()))}."
        )
    path = Path(input_path)
    if path.is_file():
        root, paths = path.parent, [path]
    elif path.is_dir():
        root = path
        paths = sorted(
            p for p in path.rglob("*") if p.is_file() and (input_format != "auto" or p.suffix in INPUT_FORMATS)
        )
    else:
        paths = sorted(Path(p) for p in glob.glob(input_path, recursive=True) if Path(p).is_file())
        root = Path(os.path.commonpath([p.parent for p in paths])) if paths else path.parent
    if not paths:
        raise ValueError(
            f"No input files at {input_path!r}: expected a file, a folder holding "
            f"{sorted(INPUT_FORMATS)} files, or a glob."
        )
    sources = []
    for file_path in paths:
        file_format = input_format if input_format != "auto" else INPUT_FORMATS.get(file_path.suffix)
        if file_format is None:
            raise ValueError(
                f"{file_path}: cannot tell the input format from the suffix {file_path.suffix!r}: "
                f"use one of {sorted(INPUT_FORMATS)} or pass --input-format."
            )
        name = file_path.relative_to(root).with_suffix("").as_posix()
        sources.append(Source(file_path, file_format, name))
    names: Dict[str, Path] = {}
    for source in sources:
        if source.name in names:
            raise ValueError(
                f"{names[source.name]} and {source.path} would write the same output shards "
                f"({source.name}.*): rename one, or annotate them separately."
            )
        names[source.name] = source.path
    return sources


def input_sources(input_path: str, input_format: str, output_dir: Path, exclude: Iterable[Path] = ()) -> List[Source]:
    """find_sources without what a run writes itself: the files under output_dir (its shards, when the
    output folder sits inside the input folder) and the files in exclude (select's output and errors
    file). Raises when nothing is left."""
    output_root = Path(output_dir).resolve()
    excluded = {Path(path).resolve() for path in exclude}
    sources = [
        source
        for source in find_sources(input_path, input_format)
        if output_root not in source.path.resolve().parents and source.path.resolve() not in excluded
    ]
    if not sources:
        raise ValueError(f"No input files at {input_path!r} outside the output folder {output_dir}.")
    return sources


def parse_line(line: bytes, file_format: str, entities_field: str, text_field: str = "text") -> Row:
    """One line of a text or JSONL file as a Row; a bad line becomes a Row with an error, nothing is dropped."""
    try:
        decoded = line.decode("utf8")
    except UnicodeDecodeError as err:
        # backslashreplace keeps the bytes recoverable: \xff stays readable as such.
        return Row({"raw": line.decode("utf8", errors="backslashreplace")}, error=f"not UTF-8 ({err})")
    if file_format == "txt":
        return Row({"text": decoded}, text=decoded)
    try:
        fields = json.loads(decoded)
        if not isinstance(fields, dict):
            return Row(
                {"raw": decoded}, error=f"a JSON {type(fields).__name__}, not an object with a {text_field!r} field"
            )
        surrogate = _lone_surrogate(fields)
    except json.JSONDecodeError as err:
        return Row({"raw": decoded}, error=f"not JSON ({err})")
    except RecursionError:
        return Row({"raw": decoded}, error="JSON nested too deeply to read (deeper than Python's recursion limit)")
    if surrogate is not None:
        # JSON's \ud800 escapes decode to text no UTF-8 output can hold: the line is kept as it was read.
        return Row({"raw": decoded}, error=surrogate)
    return parse_fields(fields, entities_field, text_field)


def parse_fields(fields: Dict[str, Any], entities_field: str, text_field: str = "text") -> Row:
    """A JSON object, Parquet or CSV row as a Row: its text_field must be a string, and entities_field
    must be free."""
    if text_field not in fields:
        return Row(
            fields,
            error=f"no {text_field!r} field" + (" (--text-column names another)" if text_field == "text" else ""),
        )
    if not isinstance(fields[text_field], str):
        return Row(fields, error=f"{text_field!r} is a {type(fields[text_field]).__name__}, not a string")
    if entities_field in fields or "error" in fields:
        taken = entities_field if entities_field in fields else "error"
        return Row(fields, error=f"the row already has a field {taken!r}: pass another --entities-field, or rename it")
    return Row(fields, text=fields[text_field])


def read_rows(source: Source, entities_field: str, text_field: str = "text") -> Iterator[Row]:
    """The rows of one input file, streamed (Parquet by record batches, CSV row by row)."""
    if source.format == "parquet":
        import pyarrow.parquet

        for batch in pyarrow.parquet.ParquetFile(source.path).iter_batches():
            for fields in batch.to_pylist():
                yield parse_fields(fields, entities_field, text_field)
    elif source.format in ("csv", "tsv"):
        yield from _read_csv(source, entities_field, text_field)
    else:
        with source.path.open("rb") as file:
            for line in iter_lines(file):
                yield parse_line(line, source.format, entities_field, text_field)


def count_rows(sources: List[Source]) -> int:
    """The rows of the inputs: lines of text and JSONL files (counted in 1 MB chunks, as iter_lines
    splits them), Parquet's row counts from its metadata."""
    total = 0
    for source in sources:
        if source.format == "parquet":
            import pyarrow.parquet

            total += pyarrow.parquet.ParquetFile(source.path).metadata.num_rows
            continue
        if source.format in ("csv", "tsv"):  # a quoted field may hold line breaks
            total += sum(1 for _ in _read_csv(source, "entities", "text"))
            continue
        last = b"\n"
        with source.path.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                total += chunk.count(b"\n")
                last = chunk[-1:]
        total += last != b"\n"  # a last line without its line break
    return total


def _lone_surrogate(value: Any, where: str = "") -> Optional[str]:
    """Where a JSON value holds a lone surrogate (a \ud800-\udfff escape without its pair), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf8")
        except UnicodeEncodeError as err:
            return (
                f"{where or 'a string'} has a lone surrogate {value[err.start]!r} at character {err.start}: not "
                "valid Unicode text (fix the escape, or replace it with U+FFFD)"
            )
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _lone_surrogate(key) is not None:
            return f"a field name has a lone surrogate {key!r}: not valid Unicode text"
        found = _lone_surrogate(item, f"{where}[{key!r}]" if where else f"field {key!r}")
        if found is not None:
            return found
    return None


def _read_csv(source: Source, entities_field: str, text_field: str) -> Iterator[Row]:
    """The data rows of a CSV (or tab-separated) file with a header, as the csv module reads them
    (quoted fields may hold line breaks); a row with bytes that are not UTF-8 is a bad row."""
    csv.field_size_limit(sys.maxsize)  # a long text is a long field, not an error
    with source.path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as file:
        reader = csv.DictReader(file, delimiter="\t" if source.format == "tsv" else ",")
        for fields in reader:
            if None in fields:  # more values than the header names
                extra = fields.pop(None)
                fields = {**fields, "extra values": extra}
                yield Row(
                    _readable(fields),
                    error=f"{len(extra)} more values than the header's {len(reader.fieldnames)} columns",
                )
                continue
            if _lone_surrogate(fields) is not None:
                yield Row(_readable(fields), error="not UTF-8 (the bytes are kept as \\x escapes)")
                continue
            yield parse_fields(fields, entities_field, text_field)


def _readable(fields: Dict[str, Any]) -> Dict[str, Any]:
    """CSV fields read with surrogateescape, their undecodable bytes written as \\x escapes."""

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf8", "surrogateescape").decode("utf8", "backslashreplace")
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return {fix(key): fix(value) for key, value in fields.items()}
