"""Command-line interface: `python -m spacy_cner COMMAND ...`."""
from enum import Enum
from pathlib import Path

import typer
from spacy.tokens import DocBin
from wasabi import Printer

from .convert import ConversionStats, iter_docs

app = typer.Typer(
    name="spacy_cner",
    help="Chinese NER for spaCy: data conversion and project commands.",
    no_args_is_help=True,
    add_completion=False,
)
msg = Printer()


class InputFormat(str, Enum):
    """Input formats of `convert`."""

    auto = "auto"
    chars = "chars"
    chars_seg = "chars-seg"
    cluener = "cluener"


class TagScheme(str, Enum):
    """Tag schemes of the one-character-per-line formats."""

    auto = "auto"
    bio = "bio"
    iob = "iob"
    bmes = "bmes"
    bioes = "bioes"


@app.callback()
def main() -> None:
    """Chinese NER for spaCy: data conversion and project commands."""
    # A callback keeps the app a command group even while it has a single command.


@app.command("convert")
def convert_command(
    input_path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="Input NER file."
    ),
    output_path: Path = typer.Argument(
        ...,
        help="Output .spacy file (or an existing folder: writes <folder>/<input stem>.spacy).",
    ),
    format: InputFormat = typer.Option(
        InputFormat.auto, "--format", "-f",
        help="chars: `char tag` lines; chars-seg: `科0 tag` lines (Weibo); cluener: JSON lines; "
        "auto: detect from the content.",
    ),
    scheme: TagScheme = typer.Option(
        TagScheme.auto, "--scheme", "-s",
        help="Tag scheme of chars/chars-seg: bio (IOB2), iob (IOB1), bmes, bioes; "
        "auto: bmes/bioes if any M-/E-/S- tag occurs, else bio.",
    ),
    repair: bool = typer.Option(
        False, "--repair",
        help="Repair malformed input and report every repair, instead of failing.",
    ),
) -> None:
    """Convert a character-level NER file into a spaCy DocBin (.spacy), one Doc per sentence."""
    if output_path.is_dir():
        output_path = output_path / f"{input_path.stem}.spacy"
    stats = ConversionStats(path=str(input_path))
    doc_bin = DocBin(attrs=["ORTH", "ENT_IOB", "ENT_TYPE"], store_user_data=False)
    try:
        for doc in iter_docs(
            input_path, format=format.value, scheme=scheme.value, repair=repair, stats=stats
        ):
            doc_bin.add(doc)
    except ValueError as err:
        # Unwrapped, so that `file:line:` stays intact for editors and grep.
        msg.fail("Conversion failed")
        print(err)
        raise typer.Exit(code=1)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(output_path)
    print_stats(stats)
    msg.good(f"Saved {stats.n_sentences} docs to {output_path}")


def print_stats(stats: ConversionStats) -> None:
    """Print the counts, the per-type entity table and every repair of a conversion."""
    scheme = f", scheme {stats.scheme}" if stats.scheme else ""
    msg.divider(f"{stats.path} (format {stats.format}{scheme})")
    msg.info(
        f"{stats.n_sentences} sentences, {stats.n_chars} characters, {stats.n_entities} entities"
    )
    if stats.n_unannotated:
        msg.warn(
            f"{stats.n_unannotated} sentences have no \"label\": their entity annotation is "
            f"missing (not O), so they cannot be used to train or evaluate NER"
        )
    if stats.entity_counts:
        rows = sorted(stats.entity_counts.items())
        rows.append(("total", stats.n_entities))
        msg.table(rows, header=("type", "entities"), divider=True, aligns=("l", "r"))
    if stats.repairs:
        msg.warn(f"{stats.n_repairs} repairs")
        rows = sorted(stats.repair_counts.items())
        msg.table(rows, header=("repair", "count"), divider=True, aligns=("l", "r"))
        for repair in sorted(stats.repairs, key=lambda repair: repair.line):
            print(f"{stats.path}:{repair.line}: [{repair.kind}] {repair.message}")
