"""The engine's options that `annotate`, `select` and `distill` share (--engine, --batch-size, --n-process,
--gpu-id, --address, --workers, --gpus-per-worker, --text-column, --entities-field): declared once here, added
to each command by `engine_options`, and turned into the one AnnotateJob its function takes by `annotate_job`."""

import dataclasses
import functools
import inspect
from enum import Enum
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Sequence

import typer

from ..annotate.job import AnnotateJob
from ._app import AnnotateEngine

# A command's parameter -> AnnotateJob's field, where the option is named for the user (--text-column).
RENAMED = {"text_column": "text_field"}


class EngineOption(NamedTuple):
    """One shared option: its type, default and flag; its help, with the engine it acts on ("Ray", "local
    engine", or None for both) said before it."""

    annotation: Any
    default: Any
    flag: str
    scope: Optional[str]
    help: str


OPTIONS: Dict[str, EngineOption] = {
    "text_column": EngineOption(
        str, "text", "--text-column", None, "The field or column holding the text (JSONL, Parquet, CSV, TSV)."
    ),
    "batch_size": EngineOption(int, 256, "--batch-size", None, "Texts per nlp.pipe batch (per Ray batch)."),
    "n_process": EngineOption(int, 1, "--n-process", "local engine", "nlp.pipe processes."),
    "entities_field": EngineOption(str, "entities", "--entities-field", None, "Output field holding the entities."),
    "gpu_id": EngineOption(int, -1, "--gpu-id", "local engine", "GPU to run on; -1 for CPU."),
    "engine": EngineOption(
        AnnotateEngine, AnnotateEngine("local"), "--engine", None, "local (nlp.pipe) or ray (Ray Data)."
    ),
    "address": EngineOption(
        Optional[str],
        None,
        "--address",
        "Ray",
        "cluster address ('auto' joins a running one); default starts a local Ray.",
    ),
    "workers": EngineOption(int, 1, "--workers", "Ray", "actors, each loading the pipeline once."),
    "gpus_per_worker": EngineOption(float, 0.0, "--gpus-per-worker", "Ray", "GPUs per actor."),
}


def option_help(option: EngineOption, stage: Optional[str] = None) -> str:
    """The option's --help: its text after the command's stage that runs the engine and the engine it acts on
    ("Teacher pass, Ray: actors, ..."), its first letter capitalised."""
    head = ", ".join(part for part in (stage, option.scope) if part)
    text = f"{head}: {option.help}" if head else option.help
    return text[0].upper() + text[1:]


def engine_options(
    names: Sequence[str], stage: Optional[str] = None, help: Optional[Mapping[str, str]] = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the shared options `names` to a typer command, after its own: typer reads the command's signature,
    so the function it registers takes them too, and the command reads them from its typer.Context's params
    (annotate_job), not as parameters of its own. Typer has no option groups; this declares each shared
    option once instead of in every command.

    names (Sequence[str]): The options' parameters, keys of OPTIONS, in --help's order.
    stage (Optional[str]): What of the command runs the engine, said before each option's help ("Teacher pass").
    help (Optional[Mapping[str, str]]): A command's own help for some of them, in place of the shared one.
    RETURNS (Callable): The decorator.
    """
    unknown = sorted(set(names) - set(OPTIONS))
    if unknown:
        raise ValueError(f"engine_options: no shared option {unknown}; the shared ones are {sorted(OPTIONS)}.")
    own_help = dict(help or {})
    added = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                OPTIONS[name].default, OPTIONS[name].flag, help=own_help.get(name, option_help(OPTIONS[name], stage))
            ),
            annotation=OPTIONS[name].annotation,
        )
        for name in names
    ]

    def add(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command)
        clash = sorted(set(names) & set(signature.parameters))
        if clash:
            raise ValueError(f"{command.__name__} declares {clash} itself: leave them to engine_options.")

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> None:
            for name in names:
                kwargs.pop(name)
            return command(*args, **kwargs)

        own = [param.replace(kind=inspect.Parameter.KEYWORD_ONLY) for param in signature.parameters.values()]
        run.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        # A new dict: functools.wraps shares the command's, and typer reads the types from it.
        run.__annotations__ = {**command.__annotations__, **{param.name: param.annotation for param in added}}
        return run

    return add


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
