"""Annotate corpora with a pipeline: resumable, exactly once, on one machine or a Ray cluster.

Input is a text file (one doc per line), JSONL (a `text` field; every other field is carried
through), Parquet, CSV or TSV (a `text` column), given as a file, a folder or a glob of shards. Each
input file is cut into shards of `shard_size` rows, and each shard is written to its own output file
(JSONL, Parquet or DocBin) in one atomic rename: a killed run restarted with the same settings
skips the shards already written and so loses and duplicates nothing. A row that cannot be
annotated (not JSON, no `text`, not a string, longer than `nlp.max_length`) comes out with an
`error` field naming its file and line, instead of stopping the job.

Where each part lives:
- inputs.py: the input files and their rows (bad rows included), counted for the progress bar;
- records.py: nlp.pipe over the rows, a doc or a bad row as an output record;
- outputs.py: ShardWriter, the rows into shards in input order, passing over those written before;
- resume.py: the settings that bind an output folder, the model's fingerprint, the done markers;
- job.py: what a run is asked (AnnotateJob) and what it did (Summary);
- select.py: `select`, active learning: the texts most worth annotating next, scored by a run of annotate;
- local_engine.py: one nlp.pipe call (n_process workers that die with the annotating process);
- ray_engine.py: Ray Data actors annotate, the driver writes the shards;
- msgpack_hooks.py: srsly's msgpack hooks looked up once (the local engine's workers), and why.
"""

import time
from pathlib import Path
from typing import Any, List, Sequence

from .inputs import (
    INPUT_FORMATS,
    TABLE_FORMATS,
    Row,
    Source,
    count_rows,
    find_sources,
    input_sources,
    iter_lines,
    parse_fields,
    parse_line,
    read_rows,
)
from .job import ENGINES, OUTPUT_FORMATS, AnnotateJob, Summary
from .local_engine import annotate_local, workers_die_with_parent
from .msgpack_hooks import msgpack_hooks_looked_up_once
from .outputs import ShardWriter
from .ray_engine import RayAnnotator, annotate_ray
from .records import doc_record, error_record, scores_key
from .resume import STATE_DIR, check_output_folder, check_settings, model_fingerprint

__all__ = [
    "annotate",
    "AnnotateJob",
    "Summary",
    "ENGINES",
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "TABLE_FORMATS",
    "STATE_DIR",
    "Source",
    "Row",
    "find_sources",
    "input_sources",
    "iter_lines",
    "parse_line",
    "parse_fields",
    "read_rows",
    "count_rows",
    "doc_record",
    "error_record",
    "scores_key",
    "ShardWriter",
    "model_fingerprint",
    "workers_die_with_parent",
    "msgpack_hooks_looked_up_once",
    "RayAnnotator",
]


def annotate(
    job: AnnotateJob,
    input_path: str,
    output_dir: Path,
    *,
    output_format: str = "jsonl",
    input_format: str = "auto",
    shard_size: int = 10_000,
    progress: bool = False,
    exclude: Sequence[Path] = (),
) -> Summary:
    """Annotate every row of the input with the job's pipeline on its engine and write it to output_dir,
    skipping done shards.

    job (AnnotateJob): The model and the settings its engine annotates with (engine, batch_size,
        n_process, gpu_id, address, workers, gpus_per_worker, text_field, entities_field, uncertainty):
        a row that already has the entities field is an error; with an uncertainty strategy (`select`
        ranks by it) the entities field holds {"entities": [...], "uncertainty": score}.
    input_path (str): A file, a folder (every .txt, .jsonl, .ndjson and .parquet file under it) or a glob.
    output_dir (Path): Where the shards go: OUTPUT/<input name>.<shard index>.<jsonl|parquet|spacy>.
    output_format (str): "jsonl", "parquet" or "spacy" (DocBin, the row's fields in doc.user_data).
    input_format (str): "auto" (by suffix), "txt", "jsonl", "parquet", "csv" or "tsv".
    shard_size (int): Rows per output shard: the unit that a restarted run skips.
    progress (bool): A tqdm bar over the input rows (their total counted first).
    exclude (Sequence[Path]): Files under input_path never read as input (select's output files).
    RETURNS (Summary): The counts and speed of this run.
    """
    engine = job.engine
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"Unknown output format {output_format!r}: expected one of {list(OUTPUT_FORMATS)}.")
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1, not {shard_size}.")
    if job.batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 (texts per nlp.pipe batch), not {job.batch_size}.")
    if job.workers < 1:
        raise ValueError(f"workers must be at least 1 (Ray actors), not {job.workers}.")
    if job.n_process < 1 and job.n_process != -1:  # spaCy's nlp.pipe: -1 is a process per CPU
        raise ValueError(
            f"n_process must be at least 1 (nlp.pipe processes), or -1 for one per CPU, not {job.n_process}."
        )
    if engine not in ENGINES:
        raise ValueError(f"Unknown engine {engine!r}: expected one of {list(ENGINES)}.")
    # A setting the chosen engine would not use is an error, not silently ignored.
    unused = (
        {
            "--workers": job.workers != 1,
            "--gpus-per-worker": job.gpus_per_worker != 0,
            "--address": job.address is not None,
        }
        if engine == "local"
        else {"--n-process": job.n_process != 1, "--gpu-id": job.gpu_id != -1}
    )
    if any(unused.values()):
        names = ", ".join(name for name, given in unused.items() if given)
        hint = "add --engine ray" if engine == "local" else "use --workers and --gpus-per-worker"
        raise ValueError(f"{names} {'is' if names.count(',') == 0 else 'are'} not used by the {engine} engine: {hint}.")
    check_output_folder(Path(output_dir))
    # The output folder may sit inside the input folder: its shards are never input.
    sources = input_sources(input_path, input_format, Path(output_dir), exclude)
    _require_pyarrow(sources, output_format)
    if job.text_field != "text":
        texts = [str(source.path) for source in sources if source.format not in TABLE_FORMATS]
        if texts:
            raise ValueError(
                f"--text-column {job.text_field!r} names a column, but {texts[0]} is a text file (a text "
                "per line): give it for JSONL, Parquet, CSV or TSV input only."
            )
    if engine == "ray" and any(source.format in ("csv", "tsv") for source in sources):
        raise ValueError(
            "The Ray engine reads text, JSONL and Parquet files: convert CSV and TSV input to Parquet "
            "(or use --engine local)."
        )
    model = job.model
    settings = {
        "model": str(Path(model).resolve()) if Path(model).exists() else model,
        "model_fingerprint": model_fingerprint(model),
        "shard_size": shard_size,
        "output_format": output_format,
        "entities_field": job.entities_field,
        "input_format": input_format,
        "text_field": job.text_field,
        "input": [str(source.path.resolve()) for source in sources],
    }
    if job.uncertainty is not None:  # a folder of plain annotations binds no strategy (and older ones lack it)
        settings.update(uncertainty=job.uncertainty, uncertainty_seed=job.uncertainty_seed)
    check_settings(Path(output_dir), settings)
    writer = ShardWriter(Path(output_dir), output_format, shard_size)
    start = time.perf_counter()
    bar = _progress_bar(progress, sources)
    writer.bar = bar
    try:
        run = annotate_local if engine == "local" else annotate_ray
        run(job, sources, writer)
    finally:
        if bar is not None:
            bar.close()
    writer.summary.seconds = time.perf_counter() - start
    return writer.summary


def _require_pyarrow(sources: List[Source], output_format: str) -> None:
    """Parquet in or out needs pyarrow: say which extra installs it before anything is written."""
    if output_format != "parquet" and not any(source.format == "parquet" for source in sources):
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ValueError(
            'Parquet input or output needs pyarrow, which is not installed: pip install "spacy-cner[parquet]".'
        ) from None


def _progress_bar(progress: bool, sources: List[Source]) -> Any:
    """A tqdm bar over the input rows, its total counted first (and so an ETA), as tqdm users expect."""
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=count_rows(sources), unit=" docs", smoothing=0.1)
