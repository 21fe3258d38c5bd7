"""Annotate corpora with a pipeline: resumable, exactly once, on one machine or a Ray cluster.

Input is a text file (one doc per line), JSONL (a `text` field; every other field is carried
through) or Parquet (a `text` column), given as a file, a folder or a glob of shards. Each input
file is cut into shards of `shard_size` rows, and each shard is written to its own output file
(JSONL, Parquet or DocBin) in one atomic rename: a killed run restarted with the same settings
skips the shards already written and so loses and duplicates nothing. A row that cannot be
annotated (not JSON, no `text`, not a string, longer than `nlp.max_length`) comes out with an
`error` field naming its file and line, instead of stopping the job.

The local engine streams every pending row through one `nlp.pipe` call (so `n_process` workers
start once). The Ray engine reads the input with Ray Data, runs `map_batches` over a pool of
actors that each load the pipeline once (Ray restarts a killed actor and retries its batches), and
streams the annotated rows back in input order (`preserve_order`) to the driver, which writes
the shards. Ray's own writers name files by block, so a restarted job could not tell which input
rows are done: writing per input shard from the driver is what makes the job resumable.
"""
import contextlib
import csv
import dataclasses
import glob
import hashlib
import io
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Dict, Iterable, Iterator, List, Optional, Tuple

import srsly
from spacy.language import Language
from spacy.tokens import Doc, DocBin

if TYPE_CHECKING:
    import pyarrow

INPUT_FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv", ".tsv": "tsv"}
# The formats whose rows have columns, the text in one of them (--text-column).
TABLE_FORMATS = ("jsonl", "parquet", "csv", "tsv")
OUTPUT_FORMATS = {"jsonl": ".jsonl", "parquet": ".parquet", "spacy": ".spacy"}
# local: nlp.pipe in this process (n_process workers); ray: Ray Data actors.
ENGINES = ("local", "ray")
# Progress and settings live beside the shards, hidden from globs such as OUTPUT/*.jsonl.
STATE_DIR = ".annotate"


@dataclasses.dataclass
class Source:
    """One input file and where its shards go."""

    path: Path
    format: str  # "txt", "jsonl" or "parquet"
    name: str  # the path relative to the input root, without its suffix: names the output shards


@dataclasses.dataclass
class Row:
    """One input row: the fields carried to the output, the text to annotate, or why it cannot be."""

    fields: Dict[str, Any]
    text: str = ""
    error: Optional[str] = None


@dataclasses.dataclass
class Summary:
    """What a run did: counts of docs, characters, bad rows and shards, and its speed."""

    docs: int = 0  # annotated docs (bad rows not included)
    chars: int = 0  # the characters of the annotated docs
    errors: int = 0  # bad rows, written out with an "error" field
    shards_written: int = 0
    shards_skipped: int = 0  # written by an earlier run of the same job (resumed)
    seconds: float = 0.0  # the whole run
    load_seconds: float = 0.0  # loading the pipeline (local engine; Ray's actors load theirs in parallel)

    @property
    def docs_per_second(self) -> float:
        """Docs a second of annotation, the pipeline's loading left out."""
        seconds = self.seconds - self.load_seconds
        return self.docs / seconds if seconds > 0 else 0.0

    @property
    def chars_per_second(self) -> float:
        """Characters a second of annotation, the pipeline's loading left out."""
        seconds = self.seconds - self.load_seconds
        return self.chars / seconds if seconds > 0 else 0.0

    def to_dict(self) -> Dict[str, float]:
        result = dataclasses.asdict(self)
        result.update(docs_per_second=self.docs_per_second, chars_per_second=self.chars_per_second)
        return result


def annotate(
    model: str,
    input_path: str,
    output_dir: Path,
    *,
    output_format: str = "jsonl",
    input_format: str = "auto",
    shard_size: int = 10_000,
    batch_size: int = 256,
    n_process: int = 1,
    entities_field: str = "entities",
    text_field: str = "text",
    gpu_id: int = -1,
    engine: str = "local",
    address: Optional[str] = None,
    workers: int = 1,
    gpus_per_worker: float = 0.0,
    progress: bool = False,
) -> Summary:
    """Annotate every row of the input with the pipeline and write it to output_dir, skipping done shards.

    model (str): Pipeline name or path.
    input_path (str): A file, a folder (every .txt, .jsonl, .ndjson and .parquet file under it) or a glob.
    output_dir (Path): Where the shards go: OUTPUT/<input name>.<shard index>.<jsonl|parquet|spacy>.
    output_format (str): "jsonl", "parquet" or "spacy" (DocBin, the row's fields in doc.user_data).
    input_format (str): "auto" (by suffix), "txt", "jsonl" or "parquet".
    shard_size (int): Rows per output shard: the unit that a restarted run skips.
    entities_field (str): The output field holding the entities; a row that already has it is an error.
    text_field (str): The field (JSONL), column (Parquet, CSV, TSV) holding the text.
    engine (str): "local" (nlp.pipe with batch_size and n_process) or "ray".
    address (Optional[str]): Ray cluster address; None starts or joins a local Ray.
    workers (int): Ray actors, each with one pipeline.
    gpus_per_worker (float): GPUs per Ray actor (0: CPU).
    RETURNS (Summary): The counts and speed of this run.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"Unknown output format {output_format!r}: expected one of {list(OUTPUT_FORMATS)}.")
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1, not {shard_size}.")
    if engine not in ENGINES:
        raise ValueError(f"Unknown engine {engine!r}: expected one of {list(ENGINES)}.")
    # A setting the chosen engine would not use is an error, not silently ignored.
    unused = ({"--workers": workers != 1, "--gpus-per-worker": gpus_per_worker != 0, "--address": address is not None}
              if engine == "local" else {"--n-process": n_process != 1, "--gpu-id": gpu_id != -1})
    if any(unused.values()):
        names = ", ".join(name for name, given in unused.items() if given)
        hint = "add --engine ray" if engine == "local" else "use --workers and --gpus-per-worker"
        raise ValueError(f"{names} {'is' if names.count(',') == 0 else 'are'} not used by the {engine} engine: {hint}.")
    # The output folder may sit inside the input folder: its shards are never input.
    output_root = Path(output_dir).resolve()
    sources = [source for source in find_sources(input_path, input_format)
               if output_root not in source.path.resolve().parents]
    if not sources:
        raise ValueError(f"No input files at {input_path!r} outside the output folder {output_dir}.")
    _require_pyarrow(sources, output_format)
    if text_field != "text":
        texts = [str(source.path) for source in sources if source.format not in TABLE_FORMATS]
        if texts:
            raise ValueError(f"--text-column {text_field!r} names a column, but {texts[0]} is a text file (a text "
                             "per line): give it for JSONL, Parquet, CSV or TSV input only.")
    if engine == "ray" and any(source.format in ("csv", "tsv") for source in sources):
        raise ValueError("The Ray engine reads text, JSONL and Parquet files: convert CSV and TSV input to Parquet "
                         "(or use --engine local).")
    settings = {
        "model": str(Path(model).resolve()) if Path(model).exists() else model,
        "model_fingerprint": model_fingerprint(model),
        "shard_size": shard_size,
        "output_format": output_format,
        "entities_field": entities_field,
        "input_format": input_format,
        "text_field": text_field,
        "input": [str(source.path.resolve()) for source in sources],
    }
    _check_settings(Path(output_dir), settings)
    writer = ShardWriter(Path(output_dir), output_format, shard_size)
    start = time.perf_counter()
    bar = _progress_bar(progress, sources)
    writer.bar = bar
    try:
        if engine == "local":
            _annotate_local(model, sources, writer, batch_size, n_process, entities_field, text_field, gpu_id, bar)
        else:
            _annotate_ray(model, sources, writer, batch_size, entities_field, text_field, address, workers,
                          gpus_per_worker, bar)
    finally:
        if bar is not None:
            bar.close()
    writer.summary.seconds = time.perf_counter() - start
    return writer.summary


def find_sources(input_path: str, input_format: str = "auto") -> List[Source]:
    """The input files, sorted, each with its format and output name.

    input_path (str): A file, a folder (searched recursively) or a glob pattern.
    input_format (str): "auto" (by suffix), "txt", "jsonl" or "parquet".
    RETURNS (List[Source]): The files in a stable order.
    """
    if input_format != "auto" and input_format not in INPUT_FORMATS.values():
        raise ValueError(f"Unknown input format {input_format!r}: expected 'auto' or one of {sorted(set(INPUT_FORMATS.values()))}.")
    path = Path(input_path)
    if path.is_file():
        root, paths = path.parent, [path]
    elif path.is_dir():
        root = path
        paths = sorted(p for p in path.rglob("*") if p.is_file() and (input_format != "auto" or p.suffix in INPUT_FORMATS))
    else:
        paths = sorted(Path(p) for p in glob.glob(input_path, recursive=True) if Path(p).is_file())
        root = Path(os.path.commonpath([p.parent for p in paths])) if paths else path.parent
    if not paths:
        raise ValueError(f"No input files at {input_path!r}: expected a file, a folder holding {sorted(INPUT_FORMATS)} files, or a glob.")
    sources = []
    for file_path in paths:
        file_format = input_format if input_format != "auto" else INPUT_FORMATS.get(file_path.suffix)
        if file_format is None:
            raise ValueError(f"{file_path}: cannot tell the input format from the suffix {file_path.suffix!r}: "
                             f"use one of {sorted(INPUT_FORMATS)} or pass --input-format.")
        name = file_path.relative_to(root).with_suffix("").as_posix()
        sources.append(Source(file_path, file_format, name))
    names: Dict[str, Path] = {}
    for source in sources:
        if source.name in names:
            raise ValueError(f"{names[source.name]} and {source.path} would write the same output shards "
                             f"({source.name}.*): rename one, or annotate them separately.")
        names[source.name] = source.path
    return sources


def iter_lines(file: BinaryIO) -> Iterator[bytes]:
    """Each line of a binary file without its line break ("\\n" or "\\r\\n"); no other character splits lines.

    Why not text mode or str.splitlines: they also split at a lone "\\r", U+2028 and other separators,
    which a doc may contain; one doc per line means one per "\\n" here, in both engines.
    """
    for number, line in enumerate(file):
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        if number == 0 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark is no part of the text
            line = line[3:]
        yield line


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
            return Row({"raw": decoded}, error=f"a JSON {type(fields).__name__}, not an object with a {text_field!r} field")
        surrogate = _lone_surrogate(fields)
    except json.JSONDecodeError as err:
        return Row({"raw": decoded}, error=f"not JSON ({err})")
    except RecursionError:
        return Row({"raw": decoded}, error="JSON nested too deeply to read (deeper than Python's recursion limit)")
    if surrogate is not None:
        # JSON's \ud800 escapes decode to text no UTF-8 output can hold: the line is kept as it was read.
        return Row({"raw": decoded}, error=surrogate)
    return parse_fields(fields, entities_field, text_field)


def _lone_surrogate(value: Any, where: str = "") -> Optional[str]:
    """Where a JSON value holds a lone surrogate (a \ud800-\udfff escape without its pair), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf8")
        except UnicodeEncodeError as err:
            return (f"{where or 'a string'} has a lone surrogate {value[err.start]!r} at character {err.start}: not "
                    "valid Unicode text (fix the escape, or replace it with U+FFFD)")
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _lone_surrogate(key) is not None:
            return f"a field name has a lone surrogate {key!r}: not valid Unicode text"
        found = _lone_surrogate(item, f"{where}[{key!r}]" if where else f"field {key!r}")
        if found is not None:
            return found
    return None


def parse_fields(fields: Dict[str, Any], entities_field: str, text_field: str = "text") -> Row:
    """A JSON object, Parquet or CSV row as a Row: its text_field must be a string, and entities_field
    must be free."""
    if text_field not in fields:
        return Row(fields, error=f"no {text_field!r} field" + (" (--text-column names another)" if text_field == "text" else ""))
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
                yield Row(_readable(fields), error=f"{len(extra)} more values than the header's {len(reader.fieldnames)} columns")
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


def doc_record(doc: Doc, row: Row, entities_field: str, spans_key: Optional[str]) -> Dict[str, Any]:
    """The output record of one doc: the row's fields plus its entities (start, end, label, text, score)."""
    scores: Dict[Tuple[int, int, str], float] = {}
    group = doc.spans.get(spans_key) if spans_key is not None else None
    if group is not None and "scores" in group.attrs:
        scores = {(span.start_char, span.end_char, span.label_): float(score) for span, score in zip(group, group.attrs["scores"])}
    entities = []
    for ent in doc.ents:
        entity = {"start": ent.start_char, "end": ent.end_char, "label": ent.label_, "text": ent.text}
        if scores:
            entity["score"] = scores.get((ent.start_char, ent.end_char, ent.label_))
        entities.append(entity)
    return {**row.fields, entities_field: entities}


def error_record(row: Row, where: str) -> Dict[str, Any]:
    """The output record of a bad row: its fields as read plus an error naming its file and line."""
    return {**row.fields, "error": f"{where}: {row.error}"}


def scores_key(nlp: Language) -> Optional[str]:
    """The doc.spans key where the pipeline's crf_ner writes entity probabilities, if any."""
    for _, pipe in nlp.pipeline:
        key = getattr(pipe, "spans_key", None)
        if isinstance(key, str):
            return key
    return None


class ShardWriter:
    """Writes annotated rows, in input order, into shards; skips shards already written; counts."""

    def __init__(self, output_dir: Path, output_format: str, shard_size: int):
        self.output_dir = output_dir
        self.output_format = output_format
        self.shard_size = shard_size
        self.summary = Summary()
        self.bar: Any = None  # a progress bar, moved on by the rows skipped as already written
        self._records: List[Dict[str, Any]] = []
        self._wheres: List[str] = []  # each record's "file, line N", for the rows a shard cannot hold
        self._shard: Optional[Tuple[str, int]] = None
        # Rows ask whether their shard exists: one stat per shard, not per row.
        self._existed: Dict[Tuple[str, int], bool] = {}

    def shard_path(self, source: Source, index: int) -> Path:
        """Where shard `index` of a source goes."""
        return self.output_dir / f"{source.name}.{index:05d}{OUTPUT_FORMATS[self.output_format]}"

    def is_written(self, source: Source, index: int) -> bool:
        """Whether shard `index` of a source was written before this run (looked up once per shard)."""
        key = (source.name, index)
        if key not in self._existed:
            self._existed[key] = self.shard_path(source, index).exists()
        return self._existed[key]

    def is_complete(self, source: Source) -> bool:
        """Whether every shard of a source was written (its marker exists)."""
        return self._marker(source).exists()

    def skip_complete(self, source: Source) -> bool:
        """If a source is complete, count its shards as skipped and say so. A source that grew since
        (lines appended: its content then starts with what was annotated) is not complete: its last
        shard, if partial, is written again with the new rows; a source whose annotated content
        changed is refused."""
        if not self.is_complete(source):
            return False
        marker = _read_state(self._marker(source))
        if "size" in marker:  # markers written before the content was recorded are trusted
            size = source.path.stat().st_size
            unchanged = size >= marker["size"] and _file_digest(source.path, marker["size"]) == marker["sha256"]
            if not unchanged:
                raise ValueError(
                    f"{source.path} changed since its shards in {self.output_dir} were written (its first "
                    f"{marker['size']:,} bytes differ): write to a new folder, or delete its shards and "
                    f"{self._marker(source)} to annotate it again."
                )
            if size > marker["size"]:
                if marker["rows"] % self.shard_size:
                    self.shard_path(source, marker["rows"] // self.shard_size).unlink(missing_ok=True)
                self._existed.clear()
                self._marker(source).unlink()
                return False
        self.skip(marker["shards"])
        if self.bar is not None:
            self.bar.update(marker["rows"])
        return True

    def add(self, source: Source, row_index: int, record: Dict[str, Any], text_length: int) -> None:
        """Add the record of row `row_index` of a source; rows must come in input order."""
        key = (source.name, row_index // self.shard_size)
        if key != self._shard:
            self.flush()
            self._shard = key
            self._source = source
        self._records.append(record)
        self._wheres.append(_where(source, row_index))
        if "error" in record:
            self.summary.errors += 1
        else:
            self.summary.docs += 1
            self.summary.chars += text_length

    def flush(self) -> None:
        """Write the current shard, if rows were added to it, through a temporary file and one rename."""
        if self._shard is None:
            return
        path = self.shard_path(self._source, self._shard[1])
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        if self.output_format == "parquet":
            self._records = self._parquet_rows(self._records, self._wheres)
        _write_records(temporary, self._records, self.output_format)
        os.replace(temporary, path)
        self.summary.shards_written += 1
        self._records, self._wheres, self._shard = [], [], None

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
                if "error" not in record:
                    self.summary.docs -= 1
                    self.summary.errors += 1
                    self.summary.chars -= len(record.get("text") or "") if isinstance(record.get("text"), str) else 0
                kept.append({"raw": json.dumps(record, ensure_ascii=False, default=str),
                             "error": f"{where}: a Parquet column cannot hold this row beside the shard's "
                                      f"others ({err}); it is kept as JSON in 'raw' (or use --format jsonl)"})
        return kept

    def complete(self, source: Source, n_rows: int) -> None:
        """Mark a source done (after flushing its last shard), so that a restart does not read it again."""
        self.flush()
        marker = self._marker(source)
        marker.parent.mkdir(parents=True, exist_ok=True)
        n_shards = -(-n_rows // self.shard_size)
        size = source.path.stat().st_size
        state = {"path": str(source.path), "rows": n_rows, "shards": n_shards, "size": size,
                 "sha256": _file_digest(source.path, size)}
        marker.write_text(json.dumps(state), encoding="utf8")

    def skip(self, n_shards: int = 1) -> None:
        self.summary.shards_skipped += n_shards

    def _marker(self, source: Source) -> Path:
        return self.output_dir / STATE_DIR / "done" / f"{source.name}.json"


def _write_records(path: Path, records: List[Dict[str, Any]], output_format: str) -> None:
    if output_format == "jsonl":
        with path.open("w", encoding="utf8", newline="\n") as file:
            for record in records:
                # U+2028/9 are valid in JSON strings but end lines for str.splitlines and JavaScript.
                line = json.dumps(record, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
                file.write(line + "\n")
    elif output_format == "parquet":
        import pyarrow
        import pyarrow.parquet

        pyarrow.parquet.write_table(_parquet_table(records), path)
    else:
        _write_docbin(path, records)


def _file_digest(path: Path, size: int) -> str:
    """sha256 of the first size bytes of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        left = size
        while left > 0:
            chunk = file.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def _read_state(path: Path) -> Dict[str, Any]:
    """A state file of the output folder (settings, a done marker), naming it when it is damaged."""
    try:
        state = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is damaged ({err}): delete it (a done marker: that input is read again; "
                         "settings.json: they are recorded anew) and rerun.") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} is damaged (not a JSON object): delete it and rerun.")
    return state


def _parquet_table(records: List[Dict[str, Any]]) -> "pyarrow.Table":
    import pyarrow

    # from_pylist takes its columns from the first row: give every row every column (None where absent).
    columns = list(dict.fromkeys(key for record in records for key in record))
    return pyarrow.Table.from_pylist([{key: record.get(key) for key in columns} for record in records])


def _check_settings(output_dir: Path, settings: Dict[str, Any]) -> None:
    """Refuse to resume into an output folder written with other settings: its shards would not match.
    Settings with no shard written yet (a run that failed at its start) bind nothing: replaced."""
    path = output_dir / STATE_DIR / "settings.json"
    if path.exists() and _has_shards(output_dir):
        previous = _read_state(path)
        # New input files are fine (each file has its own shards); a change of these is not.
        keys = ["model", "shard_size", "output_format", "entities_field"]
        # Folders written before these were recorded lack them.
        keys += [key for key in ("model_fingerprint", "input_format", "text_field") if previous.get(key) is not None]
        changed = [key for key in keys if previous.get(key) != settings[key]]
        if changed:
            details = "; ".join(f"{key}: {previous.get(key)!r} then, {settings[key]!r} now" for key in changed)
            raise ValueError(f"{output_dir} holds shards written with other settings ({details}). "
                             "Rerun with the same settings to resume, or write to a new folder.")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, ensure_ascii=False, indent=2), encoding="utf8")


def model_fingerprint(model: str) -> Optional[str]:
    """A hash of every file of the pipeline (a folder, or an installed package's), so that a resumed run
    can tell the same path now holding another model; None when the model cannot be found as files."""
    path = Path(model)
    if not path.exists():
        try:
            from spacy.util import get_package_path

            path = get_package_path(model)
        except Exception:  # not an installed package: spacy.load will say so
            return None
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(file.relative_to(path).as_posix().encode("utf8") + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _has_shards(output_dir: Path) -> bool:
    suffixes = set(OUTPUT_FORMATS.values())
    return any(path.is_file() and path.suffix in suffixes for path in output_dir.iterdir())


def _require_pyarrow(sources: List[Source], output_format: str) -> None:
    """Parquet in or out needs pyarrow: say which extra installs it before anything is written."""
    if output_format != "parquet" and not any(source.format == "parquet" for source in sources):
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ValueError(
            "Parquet input or output needs pyarrow, which is not installed: pip install \"spacy-cner[parquet]\"."
        ) from None


def _where(source: Source, row_index: int) -> str:
    unit = "line" if source.format in ("txt", "jsonl") else "row"
    return f"{source.path}, {unit} {row_index + 1}"


def _pipe(nlp: Language, items: Iterable[Tuple[Row, Any]], **pipe_kwargs: Any) -> Iterator[Tuple[Row, Any, Optional[Doc]]]:
    """nlp.pipe over (row, context) pairs in order; bad and too long rows pass through with doc None."""
    max_length = nlp.max_length

    def texts() -> Iterator[Tuple[str, Tuple[Row, Any, bool]]]:
        for row, context in items:
            if row.error is None and len(row.text) > max_length:
                row.error = f"a text of {len(row.text)} characters is longer than nlp.max_length ({max_length})"
            # A bad row still goes through (as "") so that nlp.pipe keeps every row in order.
            yield (row.text if row.error is None else ""), (row, context)

    for doc, (row, context) in nlp.pipe(texts(), as_tuples=True, **pipe_kwargs):
        yield row, context, (doc if row.error is None else None)


def _annotate_local(model, sources, writer, batch_size, n_process, entities_field, text_field, gpu_id, bar) -> None:
    import spacy
    from spacy.cli._util import setup_gpu

    setup_gpu(gpu_id, silent=True)
    start = time.perf_counter()
    try:
        nlp = spacy.load(model)
    except OSError as err:  # a mistyped path or package name: one line, not a traceback
        raise ValueError(f"Cannot load the pipeline {model!r}: {err}") from None
    writer.summary.load_seconds = time.perf_counter() - start
    spans_key = scores_key(nlp)

    def pending() -> Iterator[Tuple[Row, Tuple[Source, int, bool]]]:
        for source in sources:
            if writer.skip_complete(source):
                continue
            n_rows = 0
            for n_rows, row in enumerate(read_rows(source, entities_field, text_field), start=1):
                index = n_rows - 1
                if writer.is_written(source, index // writer.shard_size):
                    if index % writer.shard_size == 0:
                        writer.skip()
                    if bar is not None:
                        bar.update(1)
                    continue
                yield row, (source, index, False)
            # An end-of-source marker row travels through nlp.pipe in order, so the source is
            # marked complete only once its last shard is written.
            yield Row({}, error="end"), (source, n_rows, True)

    with msgpack_hooks_looked_up_once(), workers_die_with_parent():
        for row, (source, index, end), doc in _pipe(nlp, pending(), batch_size=batch_size, n_process=n_process):
            if end:
                writer.complete(source, index)
                continue
            if writer.output_format == "spacy":
                record_doc = doc if doc is not None else nlp.make_doc("")
                _docbin_add(writer, source, index, row, record_doc)
            else:
                record = doc_record(doc, row, entities_field, spans_key) if doc is not None else error_record(row, _where(source, index))
                writer.add(source, index, record, len(row.text))
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(_rate(writer.summary, bar), refresh=False)


# Whether a process forked now (nlp.pipe's n_process workers) should end when its parent does.
_DIE_WITH_PARENT = False
# prctl(PR_SET_PDEATHSIG, signal): the signal Linux sends a process when its parent ends.
_PR_SET_PDEATHSIG = 1
# The pid of the process that is forking (read by the child).
_FORKING_PID = 0


@contextlib.contextmanager
def workers_die_with_parent() -> Iterator[None]:
    """Within this block, a forked worker (nlp.pipe's n_process) gets SIGTERM when the annotating
    process ends, even killed with SIGKILL (Linux's PR_SET_PDEATHSIG; elsewhere nothing changes).

    Why: spaCy's workers wait on their queues for more texts; a parent killed by a signal (a
    cluster's preemption, an out-of-memory kill) left them running, holding their memory.
    """
    global _DIE_WITH_PARENT
    previous, _DIE_WITH_PARENT = _DIE_WITH_PARENT, True
    try:
        yield
    finally:
        _DIE_WITH_PARENT = previous


def _note_forking_pid() -> None:
    global _FORKING_PID
    _FORKING_PID = os.getpid()


def _set_death_signal() -> None:
    if not (_DIE_WITH_PARENT and sys.platform.startswith("linux")):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the workers behave as before
        return
    if os.getppid() != _FORKING_PID:  # the parent ended between the fork and prctl
        os._exit(1)


os.register_at_fork(before=_note_forking_pid, after_in_child=_set_death_signal)


@contextlib.contextmanager
def msgpack_hooks_looked_up_once() -> Iterator[None]:
    """srsly's msgpack hooks looked up once for the block, then srsly's lookup restored.

    srsly finds its msgpack encoders and decoders in catalogue on every packb/unpackb: a scan of the
    installed entry points and of every registered function, ~2.5 ms once a pipeline is loaded.
    nlp.pipe(n_process > 1) packs each doc three times in a worker and unpacks it three times in the
    main process, which made `--n-process 2` 0.3x as fast as one process on short docs (measured on
    Resume sentences). Inside the block the hooks are the ones registered when it starts; workers
    forked inside it inherit them (under the spawn and forkserver start methods, forkserver being
    Python 3.14's default on Linux, they look them up as before: correct, only slower). Blocks
    nest: each restores what was there when it began.
    """
    registries = (srsly.msgpack_encoders, srsly.msgpack_decoders)
    before = [vars(registry).get("get_all") for registry in registries]
    for registry in registries:
        hooks = registry.get_all()
        registry.get_all = lambda hooks=hooks: dict(hooks)
    try:
        yield
    finally:
        for registry, get_all in zip(registries, before):
            del registry.get_all
            if get_all is not None:
                registry.get_all = get_all


def _docbin_add(writer: ShardWriter, source: Source, index: int, row: Row, doc: Doc) -> None:
    """DocBin shards: the doc with the row's fields in doc.user_data (and the error, for a bad row)."""
    doc.user_data["fields"] = row.fields
    try:
        srsly.msgpack_dumps(row.fields)
    except (OverflowError, TypeError, ValueError) as err:  # an integer beyond 64 bits, say
        row = dataclasses.replace(row, fields={"raw": json.dumps(row.fields, ensure_ascii=False, default=str)},
                                  error=f"a DocBin cannot hold its fields ({err}); they are kept as JSON in 'raw'")
        doc = Doc(doc.vocab)  # the row is kept in its fields, as a bad row
        doc.user_data["fields"] = row.fields
    if row.error is not None:
        doc.user_data["error"] = f"{_where(source, index)}: {row.error}"
        record = {"error": doc.user_data["error"], "doc": doc}
    else:
        record = {"doc": doc}
    writer.add(source, index, record, len(row.text))


def _write_docbin(path: Path, records: List[Dict[str, Any]]) -> None:
    docbin = DocBin(store_user_data=True)
    for record in records:
        docbin.add(record["doc"])
    docbin.to_disk(path)


def _rate(summary: Summary, bar: Any) -> str:
    elapsed = bar.format_dict.get("elapsed") or 0.0
    return f"{summary.chars / elapsed:,.0f} chars/s, {summary.errors} errors" if elapsed else ""


def _progress_bar(progress: bool, sources: List[Source]) -> Any:
    """A tqdm bar over the input rows, its total counted first (and so an ETA), as tqdm users expect."""
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=count_rows(sources), unit=" docs", smoothing=0.1)


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


class RayAnnotator:
    """A Ray Data actor: loads the pipeline once, then annotates batches of input rows.

    Each output row holds the input file's path and a pickled result: the record, the doc (DocBin
    output) or the bad Row, which the driver locates, as it alone knows each row's line number.
    Pickles keep the fields' types exactly, whatever Arrow would infer for a column of mixed values.
    """

    def __init__(self, model: str, file_format: str, output_format: str, entities_field: str, batch_size: int,
                 use_gpu: bool, text_field: str = "text"):
        import spacy

        if use_gpu:
            spacy.require_gpu()
        self.nlp = spacy.load(model)
        self.spans_key = scores_key(self.nlp)
        self.file_format = file_format
        self.output_format = output_format
        self.entities_field = entities_field
        self.text_field = text_field
        self.batch_size = batch_size

    def __call__(self, batch: "pyarrow.Table") -> "pyarrow.Table":
        import pyarrow

        paths = batch.column("path").to_pylist()
        if self.file_format == "parquet":
            rows = [parse_fields(fields, self.entities_field, self.text_field)
                    for fields in batch.drop_columns(["path"]).to_pylist()]
        else:
            rows = [parse_line(line, self.file_format, self.entities_field, self.text_field)
                    for line in batch.column("line").to_pylist()]
        results = []
        for row, _, doc in _pipe(self.nlp, ((row, None) for row in rows), batch_size=self.batch_size):
            if doc is None:
                results.append(pickle.dumps(("error", row)))
            elif self.output_format == "spacy":
                results.append(pickle.dumps(("doc", row, doc.to_bytes())))
            else:
                results.append(pickle.dumps(("record", doc_record(doc, row, self.entities_field, self.spans_key), len(row.text))))
        return pyarrow.table({"path": pyarrow.array(paths, pyarrow.string()), "result": pyarrow.array(results, pyarrow.binary())})


def _split_lines(row: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Ray flat_map: one whole text/JSONL file (read_binary_files) into one row per line, as iter_lines splits."""
    return [{"path": row["path"], "line": line} for line in iter_lines(io.BytesIO(row["bytes"]))]


# Reading and splitting lines reserve no CPU: the actors take one each, and with as many actors as
# CPUs (--workers 2 on 2 cores) a reading task that waited for a free CPU would never start.
_IO_TASK = {"num_cpus": 0}


def _annotate_ray(model, sources, writer, batch_size, entities_field, text_field, address, workers, gpus_per_worker,
                  bar) -> None:
    try:
        import ray
        import ray.data
    except ImportError as err:
        raise ImportError("The Ray engine needs Ray Data: pip install 'spacy-cner[ray]'") from err
    formats = {source.format for source in sources}
    if len(formats) > 1:
        raise ValueError(f"The Ray engine reads one input format per job, found {sorted(formats)}: annotate each separately.")
    file_format = formats.pop()
    pending = [source for source in sources if not writer.skip_complete(source)]
    if not pending:
        return
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # the driver writes shards in input order
    context.enable_progress_bars = False
    model = str(Path(model).resolve()) if Path(model).exists() else model
    paths = [str(source.path.resolve()) for source in pending]
    by_path = {str(source.path.resolve()): source for source in pending}
    if file_format == "parquet":
        import pyarrow.parquet

        for source in pending:
            if "path" in pyarrow.parquet.read_schema(source.path).names:
                raise ValueError(f"{source.path} has a column 'path', which Ray Data uses to name each row's file: rename it.")
        dataset = ray.data.read_parquet(paths, include_paths=True, **_IO_TASK)
    else:
        dataset = ray.data.read_binary_files(paths, include_paths=True, **_IO_TASK)
        dataset = dataset.flat_map(_split_lines, **_IO_TASK)
    dataset = dataset.map_batches(
        RayAnnotator,
        fn_constructor_kwargs={
            "model": model, "file_format": file_format, "output_format": writer.output_format,
            "entities_field": entities_field, "batch_size": batch_size, "use_gpu": gpus_per_worker > 0,
            "text_field": text_field,
        },
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        num_gpus=gpus_per_worker or None,
    )
    if writer.output_format == "spacy":
        import spacy

        vocab = spacy.blank("zh").vocab
    counts = {path: 0 for path in paths}
    current = None
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        for path, payload in zip(batch.column("path").to_pylist(), batch.column("result").to_pylist()):
            if current is not None and path != current:
                writer.complete(by_path[current], counts[current])
            current = path
            source, index = by_path[path], counts[path]
            counts[path] += 1
            if writer.is_written(source, index // writer.shard_size):
                if index % writer.shard_size == 0:
                    writer.skip()
                if bar is not None:
                    bar.update(1)
                continue
            kind, *rest = pickle.loads(payload)
            row = rest[0] if kind != "record" else None
            if writer.output_format == "spacy":
                doc = Doc(vocab).from_bytes(rest[1]) if kind == "doc" else Doc(vocab, words=[])
                _docbin_add(writer, source, index, row, doc)
            elif kind == "error":
                writer.add(source, index, error_record(row, _where(source, index)), 0)
            else:
                writer.add(source, index, rest[0], rest[1])
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(_rate(writer.summary, bar), refresh=False)
    if current is not None:
        writer.complete(by_path[current], counts[current])
    for path, source in by_path.items():
        if counts[path] == 0:  # an empty file yields no rows
            writer.complete(source, 0)
