"""Moved to spacy_cner.annotate.select (select reads annotate's shards and state); this module keeps the
old import path, and `select`'s old signature (the model and the engine's settings one by one), for one
release (CHANGELOG.md)."""

from pathlib import Path
from typing import Optional

from .annotate.job import AnnotateJob
from .annotate.select import (  # noqa: F401
    ENTITIES_FIELD,
    OUTPUT_FORMATS,
    POOL_FACTOR,
    SHINGLE,
    Candidate,
    NearDuplicates,
    Ranking,
    SelectSummary,
    Typicality,
    pick,
    power_key,
    score_docs,
    write_selection,
)
from .annotate.select import select as select_job
from .annotate.uncertainty import SPAN_STRATEGIES, STRATEGIES, scoring_pipe, strategy_score  # noqa: F401


def select(
    model: str,
    input_path: str,
    n: int,
    output: Path,
    *,
    batch_size: int = 256,
    n_process: int = 1,
    address: Optional[str] = None,
    workers: int = 1,
    text_field: str = "text",
    gpu_id: int = -1,
    gpus_per_worker: float = 0.0,
    engine: str = "local",
    **options,
) -> SelectSummary:
    """spacy_cner.annotate.select.select with the engine's settings given one by one (the old signature)."""
    job = AnnotateJob(
        model,
        engine=engine,
        batch_size=batch_size,
        text_field=text_field,
        n_process=n_process,
        gpu_id=gpu_id,
        address=address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
    )
    return select_job(job, input_path, n, output, **options)
