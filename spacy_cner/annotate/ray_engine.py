"""The Ray engine: Ray Data reads the input, a pool of actors that each load the pipeline once annotates
it with map_batches (Ray restarts a killed actor and retries its batches), and the annotated rows
stream back in input order (`preserve_order`) to the driver, which writes the shards.

Ray's own writers name files by block, so a restarted job could not tell which input rows are done:
writing per input shard from the driver is what makes the job resumable.
"""

import io
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from spacy.tokens import Doc

from ..corpus.problems import iter_lines
from .inputs import Source, parse_fields, parse_line
from .job import AnnotateJob
from .outputs import ShardWriter
from .records import doc_record, error_record, pipe_rows, scores_key, set_uncertainty

if TYPE_CHECKING:
    import pyarrow

# Reading and splitting lines reserve no CPU: the actors take one each, and with as many actors as
# CPUs (--workers 2 on 2 cores) a reading task that waited for a free CPU would never start.
_IO_TASK = {"num_cpus": 0}


class RayAnnotator:
    """A Ray Data actor: loads the pipeline once, then annotates batches of input rows.

    Each output row holds the input file's path and a pickled result: the record, the doc (DocBin
    output) or the bad Row, which the driver locates, as it alone knows each row's line number.
    Pickles keep the fields' types exactly, whatever Arrow would infer for a column of mixed values.
    """

    def __init__(
        self,
        model: str,
        file_format: str,
        output_format: str,
        entities_field: str,
        batch_size: int,
        use_gpu: bool,
        text_field: str = "text",
        uncertainty: Optional[str] = None,
        uncertainty_seed: int = 0,
    ):
        import spacy

        if use_gpu:
            spacy.require_gpu()
        self.nlp = spacy.load(model)
        set_uncertainty(self.nlp, uncertainty, uncertainty_seed)
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
            rows = [
                parse_fields(fields, self.entities_field, self.text_field)
                for fields in batch.drop_columns(["path"]).to_pylist()
            ]
        else:
            rows = [
                parse_line(line, self.file_format, self.entities_field, self.text_field)
                for line in batch.column("line").to_pylist()
            ]
        results = []
        for row, _, doc in pipe_rows(self.nlp, ((row, None) for row in rows), batch_size=self.batch_size):
            if doc is None:
                results.append(pickle.dumps(("error", row)))
            elif self.output_format == "spacy":
                results.append(pickle.dumps(("doc", row, doc.to_bytes())))
            else:
                results.append(
                    pickle.dumps(("record", doc_record(doc, row, self.entities_field, self.spans_key), len(row.text)))
                )
        return pyarrow.table(
            {"path": pyarrow.array(paths, pyarrow.string()), "result": pyarrow.array(results, pyarrow.binary())}
        )


def annotate_ray(job: AnnotateJob, sources: List[Source], writer: ShardWriter) -> None:
    """Annotate the sources on Ray (job.address, job.workers actors, job.gpus_per_worker each), the
    driver writing the shards and skipping what the writer finds written."""
    try:
        import ray
        import ray.data
    except ImportError as err:
        raise ImportError("The Ray engine needs Ray Data: pip install 'spacy-cner[ray]'") from err
    formats = {source.format for source in sources}
    if len(formats) > 1:
        raise ValueError(
            f"The Ray engine reads one input format per job, found {sorted(formats)}: annotate each separately."
        )
    file_format = formats.pop()
    pending = [source for source in sources if not writer.skip_complete(source)]
    if not pending:
        return
    for source in pending:  # each fingerprinted before Ray reads it
        writer.begin(source)
    if not ray.is_initialized():
        try:
            ray.init(address=job.address, ignore_reinit_error=True, log_to_driver=False)
        except ConnectionError as err:  # --address auto with no cluster running, say
            first = str(err).split("\n")[0]
            raise ValueError(
                f"Cannot join the Ray cluster at --address {job.address} ({first}): start one "
                "(`ray start --head`) or leave --address out to start a local Ray."
            ) from None
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # the driver writes shards in input order
    context.enable_progress_bars = False
    model = str(Path(job.model).resolve()) if Path(job.model).exists() else job.model
    paths = [str(source.path.resolve()) for source in pending]
    by_path = {str(source.path.resolve()): source for source in pending}
    if file_format == "parquet":
        import pyarrow.parquet

        for source in pending:
            if "path" in pyarrow.parquet.read_schema(source.path).names:
                raise ValueError(
                    f"{source.path} has a column 'path', which Ray Data uses to name each row's file: rename it."
                )
        dataset = ray.data.read_parquet(paths, include_paths=True, **_IO_TASK)
    else:
        dataset = ray.data.read_binary_files(paths, include_paths=True, **_IO_TASK)
        dataset = dataset.flat_map(_split_lines, **_IO_TASK)
    dataset = dataset.map_batches(
        RayAnnotator,
        fn_constructor_kwargs={
            "model": model,
            "file_format": file_format,
            "output_format": writer.output_format,
            "entities_field": job.entities_field,
            "batch_size": job.batch_size,
            "use_gpu": job.gpus_per_worker > 0,
            "text_field": job.text_field,
            "uncertainty": job.uncertainty,
            "uncertainty_seed": job.uncertainty_seed,
        },
        batch_size=job.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=job.workers),
        num_cpus=1,
        num_gpus=job.gpus_per_worker or None,
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
            if writer.skip_written(source, index):
                continue
            kind, *rest = pickle.loads(payload)
            row = rest[0] if kind != "record" else None
            if writer.output_format == "spacy":
                doc = Doc(vocab).from_bytes(rest[1]) if kind == "doc" else Doc(vocab, words=[])
                writer.add_doc(source, index, row, doc)
            elif kind == "error":
                writer.add(source, index, error_record(row, source.where(index)), 0)
            else:
                writer.add(source, index, rest[0], rest[1])
    if current is not None:
        writer.complete(by_path[current], counts[current])
    for path, source in by_path.items():
        if counts[path] == 0:  # an empty file yields no rows
            writer.complete(source, 0)


def _split_lines(row: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Ray flat_map: one whole text/JSONL file (read_binary_files) into one row per line, as iter_lines splits."""
    return [{"path": row["path"], "line": line} for line in iter_lines(io.BytesIO(row["bytes"]))]
