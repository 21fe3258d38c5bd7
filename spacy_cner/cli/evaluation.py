"""`show-ents`, `robustness` and `model-card`: what a pipeline finds in a text, how robust it is on a test
corpus, and the card its package shows."""

import unicodedata
from pathlib import Path
from typing import Optional, Sequence

import srsly
import typer

from ._app import Pairing, app, file_option, msg
from .checks import check_output, load_pipeline, positional_output, read_docbin


@app.command("show-ents")
def show_ents_command(
    model: str = typer.Argument(..., help="Pipeline name or path."),
    text: str = typer.Argument(..., help="Text to tag."),
) -> None:
    """Print the entities a pipeline finds in a text."""
    doc = load_pipeline(model)(text)
    msg.info(text)
    rows = [(ent.text, ent.label_, str(ent.start_char), str(ent.end_char)) for ent in doc.ents]
    print(display_table(rows, header=("entity", "label", "start", "end"), aligns="llrr"))


def display_width(text: str) -> int:
    """Columns a text takes in a terminal: 2 for wide and full-width characters (CJK), 0 for combining marks."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text
    )


def display_table(rows: Sequence[Sequence[str]], header: Sequence[str], aligns: str) -> str:
    """A plain-text table aligned by display width (wasabi's tables count characters, so CJK
    cells push the columns after them out of line). aligns: "l" or "r" per column."""
    lines = [list(header)] + [list(row) for row in rows]
    widths = [max(display_width(line[i]) for line in lines) for i in range(len(header))]

    def cell(text: str, i: int) -> str:
        pad = " " * (widths[i] - display_width(text))
        return text + pad if aligns[i] == "l" else pad + text

    rendered = ["  ".join(cell(text, i) for i, text in enumerate(line)).rstrip() for line in lines]
    rendered.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(rendered)


@app.command("robustness")
def robustness_command(
    model: str = typer.Argument(..., help="Pipeline name or path."),
    data: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="Test corpus (.spacy), sentences in file order."
    ),
    output: Optional[Path] = typer.Argument(None, help="Folder for metrics.json and report.html."),
    output_option: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Deprecated: OUTPUT as an argument, as the other commands take it."
    ),
    pairing: Pairing = typer.Option(Pairing("adjacent"), "--pairing", help="Which sentences to join."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random pairing."),
    batch_size: int = typer.Option(256, "--batch-size", help="Texts per nlp.pipe batch."),
    max_examples: int = typer.Option(200, "--max-examples", help="Changed samples shown in the report."),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU to run on; -1 for CPU."),
) -> None:
    """Sentence-level robustness: S-, P-, R-F1 and Asr of a pipeline when test sentences are joined."""
    from ..backends.devices import setup_gpu
    from ..robustness.metrics import evaluate_robustness
    from ..robustness.report import render_report

    output = positional_output(output, output_option, "robustness MODEL DATA OUTPUT")
    check_output(output, folder=True)
    try:
        setup_gpu(gpu_id)
    except ValueError as err:  # no CuPy, or no GPU: one line, as annotate gives
        msg.fail(
            f'--gpu-id {gpu_id}: {err}. Install CuPy (pip install "spacy-cner[cuda]") on a machine '
            "with a CUDA GPU, or leave --gpu-id out to run on the CPU.",
            exits=1,
        )
    nlp = load_pipeline(model)
    docs = list(read_docbin(data).get_docs(nlp.vocab))
    if len(docs) < 2:
        msg.fail(f"{data} holds {len(docs)} doc(s); joining sentences needs at least 2.", exits=1)
    msg.info(f"{len(docs)} sentences from {data}, {pairing.value} pairs")
    try:
        scores = evaluate_robustness(nlp, docs, pairing.value, seed, batch_size, progress=True)
    except ValueError as err:
        msg.fail(f"{data}: {err}", exits=1)
    result = scores.to_dict()
    result.update({"model": model, "data": str(data), "pairing": pairing.value, "seed": seed})
    try:
        output.mkdir(parents=True, exist_ok=True)
        srsly.write_json(output / "metrics.json", result)
        (output / "report.html").write_text(render_report(scores, model, max_examples), encoding="utf8")
    except OSError as err:  # checked before the work; a disk that filled up since
        msg.fail(f"Cannot write {output}: {err}", exits=1)
    rows = [
        (name, f"{result[key]['p'] * 100:.2f}", f"{result[key]['r'] * 100:.2f}", f"{result[key]['f'] * 100:.2f}")
        for key, name in (("standard", "S-F1"), ("perturbed", "P-F1"), ("robust", "R-F1"))
    ]
    msg.table(rows, header=("metric", "P", "R", "F1"), divider=True)
    msg.good(
        f"Asr {scores.attack_success_rate * 100:.3f}% ({scores.n_changed_chars} of {scores.n_chars} characters), "
        f"{len(scores.changed)} changed entities; wrote {output / 'metrics.json'} and {output / 'report.html'}"
    )


@app.command("model-card")
def model_card_command(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="The trained pipeline's folder."),
    source_name: Optional[str] = typer.Option(None, "--source-name", help="The training data's name."),
    source_url: Optional[str] = typer.Option(None, "--source-url", help="Where the training data comes from."),
    source_license: Optional[str] = typer.Option(None, "--source-license", help="The training data's licence."),
    descriptions: Optional[Path] = file_option(
        None,
        "--labels",
        help="A JSON file of label -> meaning, for labels this package does not know (kept in the pipeline too).",
    ),
    speed_corpus: Optional[Path] = file_option(
        None,
        "--speed-corpus",
        help="A .spacy file (e.g. the dev split) to measure the characters a second on.",
    ),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Write the card into a copy of the pipeline there, leaving MODEL as it is.",
    ),
) -> None:
    """Write the model card into a pipeline's meta.json (labels and their meanings, per-label scores,
    training data, speed), which `spacy package` puts in the package's README."""
    from .model_card import write_model_card

    try:
        given = srsly.read_json(descriptions) if descriptions else None
        if given is not None and not isinstance(given, dict):
            raise ValueError(f"{descriptions}: expected a JSON object of label -> meaning, got {type(given).__name__}.")
        write_model_card(
            model,
            source_name=source_name,
            source_url=source_url,
            source_license=source_license,
            descriptions=given,
            speed_corpus=speed_corpus,
            output=output,
        )
    except (ValueError, OSError) as err:
        msg.fail(f"Writing the model card failed: {err}", exits=1)
    msg.good(f"Wrote the model card to {(output or model) / 'meta.json'}")
