"""The engine's options that `annotate`, `select` and `distill` share (--engine, --batch-size, --n-process,
--gpu-id, --address, --workers, --gpus-per-worker, --text-column, --entities-field), as one AnnotateJob.

Each command keeps its own typer options (their help says what they do there: "Teacher pass: ..." in
distill); this is the one place that turns them into the job its function takes."""

import dataclasses
from enum import Enum
from typing import Any, Mapping

from ..annotate.job import AnnotateJob

# A command's parameter -> AnnotateJob's field, where the option is named for the user (--text-column).
RENAMED = {"text_column": "text_field"}


def annotate_job(model: str, options: Mapping[str, Any]) -> AnnotateJob:
    """The AnnotateJob of a command's parsed options: each of AnnotateJob's fields that the command has an
    option for, the others at their defaults.

    model (str): The pipeline the job runs (the command's MODEL, distill's TEACHER).
    options (Mapping[str, Any]): The command's parameters by name (typer.Context.params); a choice (an
        Enum) gives its value.
    RETURNS (AnnotateJob): The job.
    """
    fields = {field.name for field in dataclasses.fields(AnnotateJob)} - {"model"}
    settings = {}
    for name, value in options.items():
        field = RENAMED.get(name, name)
        if field in fields:
            settings[field] = value.value if isinstance(value, Enum) else value
    return AnnotateJob(model, **settings)
