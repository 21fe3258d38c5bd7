"""`distill`: a small, fast student pipeline trained on a trained crf_ner's soft targets
(spacy_cner.training.distill)."""

from pathlib import Path
from typing import List, Optional

import click
import typer

from .checks import fail_on
from ._app import app, file_option, msg
from .engine_options import annotate_job, engine_options


@app.command(
    "distill",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
@engine_options(
    ["batch_size", "n_process", "gpu_id", "engine", "address", "workers", "gpus_per_worker"],
    stage="Teacher pass",
    help={"gpu_id": "GPU for the local teacher pass and the training; -1 for CPU."},
)
def distill_command(
    ctx: typer.Context,
    teacher: str = typer.Argument(..., help="The trained pipeline (name or path) whose crf_ner teaches."),
    student_config: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="The student's training config, e.g. configs/student.cfg."
    ),
    train: Path = file_option(
        ...,
        "--train",
        help="The train split (.spacy): its texts get the teacher's soft targets, its gold the gold loss.",
    ),
    dev: Path = file_option(
        ...,
        "--dev",
        help="The dev split (.spacy): model-best is chosen on its F1; --text may not hold its texts.",
    ),
    test: Optional[Path] = file_option(
        None,
        "--test",
        help="The test split (.spacy), if there is one: --text may not hold its texts either.",
    ),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="Folder for model-best, model-last, the student's config and the teacher's "
        "cached soft targets (teacher/); rerun with the same settings to resume.",
    ),
    text: Optional[List[str]] = typer.Option(
        None,
        "--text",
        "-t",
        help="Unlabeled text the teacher annotates for the student (repeatable): a .txt (one text per line), "
        ".jsonl (a 'text' field), .parquet, .csv or .tsv file, a folder of them or a glob; '' is left out. "
        "Never a split that will be scored: texts of --dev (or --test) are refused.",
    ),
    temperature: float = typer.Option(
        2.0,
        "--temperature",
        help="The CRF scores of teacher and student are divided by it in the loss (softer targets carry the "
        "teacher's second choices; BENCHMARKS.md, distillation).",
    ),
    gold_weight: float = typer.Option(
        0.5,
        "--gold-weight",
        help="Weight of the gold log-likelihood (train split) beside the KL; 0: soft targets only.",
    ),
    augment: int = typer.Option(
        0,
        "--augment",
        min=0,
        help="Copies of each train text with its entities replaced by other names of their labels from the train "
        "split, for the teacher to label beside --text (0: none).",
    ),
    max_steps: Optional[int] = typer.Option(
        None, "--max-steps", help="Stop training after N steps (default: the config's)."
    ),
    shard_size: int = typer.Option(
        10_000, "--shard-size", help="Teacher pass: texts per cached shard, the unit a restart skips."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar over the teacher pass."),
) -> None:
    """Distill a teacher pipeline's crf_ner into a student: the teacher's tag marginals and transition counts
    on the train split and the unlabeled texts (annotate's engine, cached in OUTPUT/teacher/, resumable),
    then the student trained on them by spaCy's loop. More arguments are config overrides, as `spacy train`
    takes them (--training.eval_frequency 500)."""
    from .arguments import parse_config_overrides

    from ..training.distill import distill

    try:
        overrides = parse_config_overrides(ctx.args)
    except click.NoSuchOption as err:  # an option of no command, and no config override (no section)
        msg.fail(
            f"{err.format_message()} The options are listed by --help; more arguments are config overrides, "
            "which name their section: --training.max_steps 5 (or the option, --max-steps 5).",
            exits=1,
        )
    with fail_on(ValueError, ImportError, OSError):
        summary = distill(
            annotate_job(teacher, ctx.params),
            student_config,
            output,
            train=train,
            dev=dev,
            test=test,
            texts=text or [],
            temperature=temperature,
            gold_weight=gold_weight,
            augment=augment,
            max_steps=max_steps,
            shard_size=shard_size,
            overrides=overrides,
            progress=not quiet,
        )
    teacher_pass = summary.teacher
    msg.good(
        f"Student saved in {output} (model-best on dev F1, model-last); teacher pass: {teacher_pass.docs} docs, "
        f"{teacher_pass.shards_written} shards written, {teacher_pass.shards_skipped} already done"
    )
