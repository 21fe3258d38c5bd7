"""What an annotate run is asked (AnnotateJob: the settings its engine uses) and what it did (Summary)."""

import dataclasses
from typing import Dict, Optional

OUTPUT_FORMATS = {"jsonl": ".jsonl", "parquet": ".parquet", "spacy": ".spacy"}
# local: nlp.pipe in this process (n_process workers); ray: Ray Data actors.
ENGINES = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class AnnotateJob:
    """What an engine runs and the settings it annotates with (where the shards go is the ShardWriter's part):
    one value that annotate, select and distill's teacher pass take, and the CLI builds from its shared options
    (spacy_cner.cli.engine_options).

    model (str): Pipeline name or path.
    engine (str): One of ENGINES: "local" (nlp.pipe with batch_size and n_process) or "ray".
    batch_size (int): Texts per nlp.pipe batch (local) or per actor batch (Ray).
    entities_field (str): The output field holding the entities.
    text_field (str): The field (JSONL), column (Parquet, CSV, TSV) holding the text.
    n_process (int): nlp.pipe's worker processes (local engine).
    gpu_id (int): The GPU to run on, -1 for the CPU (local engine).
    address (Optional[str]): Ray cluster address; None starts or joins a local Ray (Ray engine).
    workers (int): Ray actors, each with one pipeline (Ray engine).
    gpus_per_worker (float): GPUs per Ray actor, 0 for the CPU (Ray engine).
    uncertainty (Optional[str]): Also score each doc for active learning with this strategy
        (crf_ner's `uncertainty`, spacy_cner.annotate.select); None: not scored.
    uncertainty_seed (int): The random strategy's seed.
    """

    model: str
    engine: str = "local"
    batch_size: int = 256
    entities_field: str = "entities"
    text_field: str = "text"
    n_process: int = 1
    gpu_id: int = -1
    address: Optional[str] = None
    workers: int = 1
    gpus_per_worker: float = 0.0
    uncertainty: Optional[str] = None
    uncertainty_seed: int = 0


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
