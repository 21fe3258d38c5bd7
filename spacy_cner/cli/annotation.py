"""`annotate`, `select` and `train-vectors`: a pipeline over a corpus, the texts to label next, vectors
from the train text."""

from pathlib import Path
from typing import List, Optional

import typer

from ..annotate.select import OUTPUT_FORMATS as SELECT_FORMATS
from ..annotate.select import STRATEGIES
from ._app import AnnotateInput, AnnotateOutput, SelectFormat, SelectStrategy, app, file_option, msg
from .checks import check_output, fail_on, positional_output
from .engine_options import annotate_job, engine_options


@app.command("annotate")
@engine_options(
    [
        "text_column",
        "batch_size",
        "n_process",
        "entities_field",
        "gpu_id",
        "engine",
        "address",
        "workers",
        "gpus_per_worker",
    ]
)
def annotate_command(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Pipeline name or path."),
    input_path: str = typer.Argument(
        ...,
        metavar="INPUT",
        help="A .txt (one doc per line), .jsonl (a 'text' field), .parquet, .csv or .tsv "
        "file (a 'text' column), a folder of them, or a glob.",
    ),
    output: Path = typer.Argument(..., help="Folder for the output shards; rerun with the same settings to resume."),
    output_format: AnnotateOutput = typer.Option(
        AnnotateOutput("jsonl"), "--format", "-f", help="Output shards: JSONL, Parquet or DocBin."
    ),
    input_format: AnnotateInput = typer.Option(
        AnnotateInput("auto"), "--input-format", help="auto (by suffix), txt, jsonl, parquet, csv or tsv."
    ),
    shard_size: int = typer.Option(10_000, "--shard-size", help="Rows per output shard, the unit a restart skips."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Annotate a corpus: entities (start, end, label, text, score) for every row, resumable, locally or on Ray."""
    from ..annotate import annotate

    with fail_on(ValueError, ImportError, OSError):  # OSError: an output path that cannot be written
        summary = annotate(
            annotate_job(model, ctx.params),
            input_path,
            output,
            output_format=output_format.value,
            input_format=input_format.value,
            shard_size=shard_size,
            progress=not quiet,
        )
    msg.good(
        f"{summary.docs} docs ({summary.chars:,} characters) in {summary.seconds:.1f} s"
        + (f" ({summary.load_seconds:.1f} s of them loading the pipeline)" if summary.load_seconds else "")
        + f": {summary.docs_per_second:,.0f} docs/s, {summary.chars_per_second:,.0f} chars/s; "
        f"{summary.shards_written} shards written, {summary.shards_skipped} already done, in {output}"
    )
    if summary.errors:
        msg.warn(f"{summary.errors} rows could not be annotated: they are in the output with an 'error' field.")


@app.command("select")
@engine_options(
    ["text_column", "batch_size", "n_process", "gpu_id", "engine", "address", "workers", "gpus_per_worker"],
    help={
        "batch_size": "Texts per batch through the pipeline.",
        "gpu_id": "Local engine: GPU to score on; -1 for CPU.",
    },
)
def select_command(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Pipeline name or path, with a crf_ner component."),
    input_path: str = typer.Argument(
        ...,
        metavar="INPUT",
        help="Unlabelled texts, as `annotate` reads them: a .txt (one per line), "
        ".jsonl (a 'text' field), .parquet, .csv or .tsv file (a 'text' column; "
        "--text-column names another), a folder of them, or a glob.",
    ),
    output: Optional[Path] = typer.Argument(
        None, metavar="OUT", help="Output file (.json for Label Studio, else .jsonl)."
    ),
    n: int = typer.Option(..., "-n", "--n", help="How many texts to select."),
    output_option: Optional[Path] = typer.Option(
        None, "-o", "--output", help="Deprecated: OUTPUT as an argument, as the other commands take it."
    ),
    strategy: SelectStrategy = typer.Option(
        SelectStrategy("entropy"), "--strategy", "-s", help="How texts are ranked: " + ", ".join(STRATEGIES) + "."
    ),
    output_format: SelectFormat = typer.Option(
        SelectFormat("jsonl"), "--format", "-f", help="For the annotation tool: " + ", ".join(SELECT_FORMATS) + "."
    ),
    diversity: float = typer.Option(
        0.7,
        "--diversity",
        help="Leave out texts whose character 3-grams overlap a selected one's "
        "this much (Jaccard); 0 keeps near-duplicates.",
    ),
    explore: float = typer.Option(
        0.0,
        "--explore",
        help="The share of the N texts drawn at random from those not at the top "
        "of the ranking (marked 'explore'); what it saves: BENCHMARKS.md, active learning.",
    ),
    power: Optional[float] = typer.Option(
        None,
        "--power",
        help="Draw the N texts at random, each with a probability proportional "
        "to its score to this power (1: stochastic power acquisition, Kirsch "
        "et al. 2023), instead of taking the N best; not with --explore.",
    ),
    density: Optional[float] = typer.Option(
        None,
        "--density",
        help="Rank by score * typicality ** this (information density: how "
        "alike a text is to the input's texts, by their characters and "
        "bigrams; 1: Settles and Craven 2008), so that typical texts go "
        "first among the uncertain ones.",
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        help="Seed of the random strategy, of the near-duplicate hashes and of --explore's and --power's draw.",
    ),
    input_format: AnnotateInput = typer.Option(
        AnnotateInput("auto"), "--input-format", help="auto (by suffix), txt, jsonl, parquet, csv or tsv."
    ),
    shard_size: int = typer.Option(
        10_000, "--shard-size", help="Rows scored per shard of OUTPUT.scores/, the unit a restart skips."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Select the texts most worth annotating next (active learning on crf_ner's marginals), with the
    model's entities pre-filled for Label Studio, doccano, Prodigy or JSONL. The texts are scored
    as `annotate` annotates them (shards in OUTPUT.scores/): a killed run, started again with the
    same settings, goes on where it stopped."""
    from ..annotate.select import select

    output = positional_output(output, output_option, "select MODEL INPUT OUT -n N")
    with fail_on(ValueError, ImportError, OSError):  # OSError: an output path that cannot be written
        summary = select(
            annotate_job(model, ctx.params),
            input_path,
            n,
            output,
            strategy=strategy.value,
            output_format=output_format.value,
            diversity=diversity or None,
            explore=explore,
            power=power,
            density=density,
            seed=seed,
            input_format=input_format.value,
            shard_size=shard_size,
            progress=not quiet,
        )
    msg.good(
        f"{summary.selected} of {summary.texts} texts selected ({strategy.value}"
        + (f", {summary.drawn} drawn at random" if summary.drawn else "")
        + (f", drawn with probabilities proportional to score ** {power:g}" if power is not None else "")
        + (f", ranked by score * typicality ** {density:g}" if density is not None else "")
        + f") in {summary.seconds:.1f} s "
        f"({summary.chars_per_second:,.0f} chars/s): {output}"
        + (f"; {summary.near_duplicates} near-duplicates left out" if summary.near_duplicates else "")
    )
    if summary.errors:
        msg.warn(
            f"{summary.errors} rows could not be read: they are in {output}.errors.jsonl, "
            "each naming its file and line."
        )
    if summary.selected < n:
        msg.warn(
            f"Only {summary.selected} of the {n} texts asked for: the input holds no more once "
            + ("bad rows and " if summary.errors else "")
            + "near-duplicates are left out"
            + (" (--diversity 0 keeps near-duplicates)." if summary.near_duplicates else ".")
        )


@app.command("train-vectors")
def train_vectors_command(
    train_path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="The train split (.spacy), as `spacy train` reads it."
    ),
    output_path: Path = typer.Argument(..., help="Folder for the vectors pipeline (--paths.vectors) and summary.json."),
    text: Optional[List[Path]] = file_option(
        None,
        "--text",
        "-t",
        help="Also read this unlabeled text of the domain, one text per line (repeatable). Never a dev or "
        "test split that will be scored.",
    ),
    width: int = typer.Option(50, "--width", help="Vector width."),
    epochs: int = typer.Option(10, "--epochs", help="word2vec epochs over the text."),
    min_count: int = typer.Option(2, "--min-count", help="Fewest occurrences a character or bigram needs."),
    seed: int = typer.Option(0, "--seed", help="The same seed gives the same vectors (with --workers 1)."),
    workers: int = typer.Option(1, "--workers", help="word2vec threads; more than 1 is faster but not repeatable."),
) -> None:
    """Train character and bigram vectors (word2vec skip-gram, gensim) on the train split's own text,
    for `--paths.vectors OUTPUT` with `static_vectors = true` (configs/default.cfg)."""
    from ..training.vectors import VectorSettings, train_vectors

    check_output(output_path, folder=True)
    try:
        settings = VectorSettings(width=width, epochs=epochs, min_count=min_count, seed=seed, workers=workers)
        summary = train_vectors([train_path, *(text or [])], output_path, settings, progress=True)
    except (ValueError, ImportError, OSError) as err:  # OSError: the output, checked before, filled up since
        msg.fail("Training vectors failed")
        print(err)
        raise typer.Exit(code=1)
    msg.good(
        f"Saved {summary.char_vectors:,} character and {summary.bigram_vectors:,} bigram vectors of width "
        f"{width} to {output_path}, from {summary.texts:,} texts ({summary.characters:,} characters)"
    )
