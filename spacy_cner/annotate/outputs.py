"""The outputs of annotate: ShardWriter puts the records, in input order, into shards of shard_size rows,
each written in one atomic rename (JSONL, Parquet or DocBin), and passes over what an earlier run wrote."""

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import srsly
from spacy.tokens import Doc, DocBin

from .inputs import Row, Source
from .job import OUTPUT_FORMATS, Summary
from .records import json_ready
from .resume import begin_input, done_marker, input_marker, read_done_marker, write_done_marker

if TYPE_CHECKING:
    import pyarrow


class ShardWriter:
    """Writes annotated rows, in input order, into shards; skips shards already written; counts."""

    def __init__(self, output_dir: Path, output_format: str, shard_size: int):
        self.output_dir = output_dir
        self.output_format = output_format
        self.shard_size = shard_size
        self.summary = Summary()
        self.bar: Any = None  # a progress bar, moved on by every row added or skipped as already written
        self._records: List[Any] = []  # JSONL: _json_line's lines; else the records
        self._wheres: List[str] = []  # each record's "file, line N", for the rows a shard cannot hold
        self._shard: Optional[Tuple[str, int]] = None
        # Rows ask whether their shard exists: one stat per shard, not per row.
        self._existed: Dict[Tuple[str, int], bool] = {}
        # Each source's size and sha256, taken before it is read (begin), recorded in its done marker.
        self._fingerprints: Dict[str, Dict[str, Any]] = {}

    def shard_path(self, source: Source, index: int) -> Path:
        """Where shard `index` of a source goes."""
        return self.output_dir / f"{source.name}.{index:05d}{OUTPUT_FORMATS[self.output_format]}"

    def is_written(self, source: Source, index: int) -> bool:
        """Whether shard `index` of a source was written before this run (looked up once per shard)."""
        key = (source.name, index)
        if key not in self._existed:
            self._existed[key] = self.shard_path(source, index).exists()
        return self._existed[key]

    def skip_written(self, source: Source, row_index: int) -> bool:
        """Whether row `row_index` of a source lies in a shard written before this run. If so the row is
        passed over: its shard counted as skipped (at the shard's first row), the progress bar moved on."""
        if not self.is_written(source, row_index // self.shard_size):
            return False
        if row_index % self.shard_size == 0:
            self.skip()
        if self.bar is not None:
            self.bar.update(1)
        return True

    def is_complete(self, source: Source) -> bool:
        """Whether every shard of a source was written (its marker exists)."""
        return done_marker(self.output_dir, source).exists()

    def skip_complete(self, source: Source) -> bool:
        """If a source is complete, count its shards as skipped and say so. A source that grew since
        (lines appended: its content then starts with what was annotated) is not complete: its last
        shard, if partial, is written again with the new rows; a source whose annotated content
        changed is refused."""
        marker = read_done_marker(self.output_dir, source)
        if marker is None:
            return False
        if "size" in marker and source.path.stat().st_size > marker["size"]:
            # The last shard again if partial, or if the old content's last line had no line break
            # (what was appended continued it).
            if marker["rows"] % self.shard_size or not marker["ends_line"]:
                self.shard_path(source, max(marker["rows"] - 1, 0) // self.shard_size).unlink(missing_ok=True)
            self._existed.clear()
            done_marker(self.output_dir, source).unlink()
            # Its old content was just checked: begin() fingerprints it anew (its shards are trusted).
            input_marker(self.output_dir, source).unlink(missing_ok=True)
            return False
        self.skip(marker["shards"])
        if self.bar is not None:
            self.bar.update(marker["rows"])
        return True

    def begin(self, source: Source) -> None:
        """Fingerprint a source before its rows are read; refuse it when shards of it written before
        came from other content (resume.begin_input)."""
        self._fingerprints[source.name] = begin_input(self.output_dir, source, self.is_written(source, 0))

    def add(self, source: Source, row_index: int, record: Dict[str, Any], text_length: int) -> None:
        """Add the record of row `row_index` of a source; rows must come in input order. JSONL shards get
        it as a line (json_ready's forms where JSON has none); a row it cannot hold is a bad row."""
        if self.output_format == "jsonl":
            record = _json_line(record, source.where(row_index))
        key = (source.name, row_index // self.shard_size)
        if key != self._shard:
            self.flush()
            self._shard = key
            self._source = source
        self._records.append(record)
        self._wheres.append(source.where(row_index))
        if record.error if isinstance(record, _Line) else "error" in record:
            self.summary.errors += 1
        else:
            self.summary.docs += 1
            self.summary.chars += text_length
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(_rate(self.summary, self.bar), refresh=False)

    def add_doc(self, source: Source, row_index: int, row: Row, doc: Doc) -> None:
        """DocBin shards: the doc with the row's fields in doc.user_data (and the error, for a bad row)."""
        try:  # msgpack has no timestamps, decimals...: their JSON forms
            row = dataclasses.replace(row, fields=json_ready(row.fields))
        except (TypeError, RecursionError):
            pass  # the check below makes it a bad row
        doc.user_data["fields"] = row.fields
        try:
            srsly.msgpack_dumps(row.fields)
        except (OverflowError, TypeError, ValueError) as err:  # an integer beyond 64 bits, say
            row = dataclasses.replace(
                row,
                fields={"raw": json.dumps(row.fields, ensure_ascii=False, default=str)},
                error=f"a DocBin cannot hold its fields ({err}); they are kept as JSON in 'raw'",
            )
            doc = Doc(doc.vocab)  # the row is kept in its fields, as a bad row
            doc.user_data["fields"] = row.fields
        if row.error is not None:
            doc.user_data["error"] = f"{source.where(row_index)}: {row.error}"
            record = {"error": doc.user_data["error"], "doc": doc}
        else:
            record = {"doc": doc}
        self.add(source, row_index, record, len(row.text))

    def flush(self) -> None:
        """Write the current shard, if rows were added to it, through a temporary file and one rename."""
        if self._shard is None:
            return
        path = self.shard_path(self._source, self._shard[1])
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        if self.output_format == "parquet":
            temporary.write_bytes(self._parquet_shard(self._records, self._wheres))
        else:
            _write_records(temporary, self._records, self.output_format)
        os.replace(temporary, path)
        self.summary.shards_written += 1
        self._records, self._wheres, self._shard = [], [], None

    def _parquet_shard(self, records: List[Dict[str, Any]], wheres: List[str]) -> bytes:
        """The records as a Parquet file that reads back; where they do not make one, each row nested too
        deeply for a reader, then each a column cannot hold beside the others, turned into an error row."""
        import pyarrow

        try:
            data = _parquet_bytes(_parquet_table(records))
        except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError, OverflowError):
            data = None
        if data is None:
            data = _parquet_bytes(_parquet_table(self._parquet_rows(self._readable_rows(records, wheres), wheres)))
        return data

    def _parquet_rows(self, records: List[Dict[str, Any]], wheres: List[str]) -> List[Dict[str, Any]]:
        """The records, each row that a Parquet column cannot hold beside the others (a field of
        another type, an integer beyond 64 bits) turned into an error row keeping it as JSON text."""
        import pyarrow

        try:
            _parquet_table(records)
            return records
        except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError, OverflowError):
            pass
        schema, kept = None, []
        for record, where in zip(records, wheres):
            try:
                row_schema = pyarrow.Table.from_pylist([record]).schema
                schema = row_schema if schema is None else pyarrow.unify_schemas([schema, row_schema])
                kept.append(record)
            except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError, OverflowError) as err:
                self._count_as_error(record)
                kept.append(
                    {
                        "raw": _raw_json(record),
                        "error": f"{where}: a Parquet column cannot hold this row beside the shard's "
                        f"others ({err}); it is kept as JSON in 'raw' (or use --format jsonl)",
                    }
                )
        return kept

    def _readable_rows(self, records: List[Dict[str, Any]], wheres: List[str]) -> List[Dict[str, Any]]:
        """The records, each row nested too deeply for a Parquet reader turned into an error row keeping
        it as JSON text (found one row at a time, in memory)."""
        import pyarrow

        kept = []
        for record, where in zip(records, wheres):
            try:
                readable = _parquet_bytes(_parquet_table([record])) is not None
            except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError, OverflowError):
                readable = True  # no column can hold it: _parquet_rows says so
            if readable:
                kept.append(record)
                continue
            self._count_as_error(record)
            kept.append(
                {
                    "raw": _raw_json(record),
                    "error": f"{where}: nested too deeply for a Parquet reader (Parquet's schema holds "
                    "100 levels, a list taking two); it is kept as JSON in 'raw' "
                    "(or use --format jsonl)",
                }
            )
        return kept

    def _count_as_error(self, record: Dict[str, Any]) -> None:
        """A row counted as a doc that turns out to be a bad row."""
        if "error" not in record:
            self.summary.docs -= 1
            self.summary.errors += 1
            self.summary.chars -= len(record.get("text") or "") if isinstance(record.get("text"), str) else 0

    def complete(self, source: Source, n_rows: int) -> None:
        """Mark a source done (after flushing its last shard), so that a restart does not read it again."""
        self.flush()
        write_done_marker(
            self.output_dir, source, n_rows, -(-n_rows // self.shard_size), self._fingerprints.get(source.name)
        )

    def skip(self, n_shards: int = 1) -> None:
        self.summary.shards_skipped += n_shards


class _Line(str):
    """A JSONL shard's record, as the line written; error: whether it is a bad row's."""

    error: bool = False


def _json_line(record: Dict[str, Any], where: str) -> _Line:
    """A record as a JSONL line: json_ready's forms where JSON has none (null for NaN, never NaN); a
    value of no JSON form makes it a bad row keeping the record as text."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # ValueError: NaN or an infinity, written as null
        try:
            text = json.dumps(json_ready(record), ensure_ascii=False)
        except (TypeError, RecursionError) as err:
            record = {
                "raw": _raw_json(record),
                "error": f"{where}: JSON cannot hold this row ({err}); it is kept as text in 'raw'",
            }
            text = json.dumps(record, ensure_ascii=False)
    # U+2028/9 are valid in JSON strings but end lines for str.splitlines and JavaScript.
    line = _Line(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    line.error = "error" in record
    return line


def _raw_json(record: Dict[str, Any]) -> str:
    """A record that an output cannot hold, as JSON text (str() of what JSON has no form for)."""
    try:
        return json.dumps(record, ensure_ascii=False, default=str)
    except RecursionError:
        return "(nested too deeply to write out)"


def _parquet_bytes(table: "pyarrow.Table") -> Optional[bytes]:
    """A table as a Parquet file's bytes; None where no reader could open the file (a schema nested
    past Parquet's depth limit, which pyarrow writes all the same)."""
    import pyarrow
    import pyarrow.parquet

    buffer = pyarrow.BufferOutputStream()
    pyarrow.parquet.write_table(table, buffer)
    data = buffer.getvalue()
    try:
        pyarrow.parquet.read_schema(pyarrow.BufferReader(data))
    except (OSError, pyarrow.ArrowException):
        return None
    return data.to_pybytes()


def _write_records(path: Path, records: List[Any], output_format: str) -> None:
    if output_format == "jsonl":  # the records are _json_line's lines
        with path.open("w", encoding="utf8", newline="\n") as file:
            for line in records:
                file.write(line + "\n")
    else:
        docbin = DocBin(store_user_data=True)
        for record in records:
            docbin.add(record["doc"])
        docbin.to_disk(path)


def _parquet_table(records: List[Dict[str, Any]]) -> "pyarrow.Table":
    import pyarrow

    # from_pylist takes its columns from the first row: give every row every column (None where absent).
    columns = list(dict.fromkeys(key for record in records for key in record))
    return pyarrow.Table.from_pylist([{key: record.get(key) for key in columns} for record in records])


def _rate(summary: Summary, bar: Any) -> str:
    elapsed = bar.format_dict.get("elapsed") or 0.0
    return f"{summary.chars / elapsed:,.0f} chars/s, {summary.errors} errors" if elapsed else ""
