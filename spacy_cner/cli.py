"""Command-line interface: `python -m spacy_cner COMMAND ...`."""
import dataclasses
import hashlib
import shutil
import unicodedata
import urllib.request
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Type

import srsly
import typer
from spacy.language import FactoryMeta, Language
from spacy.tokens import DocBin
from wasabi import Printer

from .active_learning import OUTPUT_FORMATS as SELECT_FORMATS
from .active_learning import STRATEGIES
from .annotate.job import ENGINES, OUTPUT_FORMATS
from .corpus.convert import FORMATS, INPUT_SCHEMES, ConversionStats, iter_docs
from .corpus.export import EXPORT_FORMATS, EXPORT_SCHEMES
from .robustness.metrics import PAIRINGS

app = typer.Typer(
    name="spacy_cner",
    help="Chinese NER for spaCy: data conversion and project commands.",
    no_args_is_help=True,
    add_completion=False,
)
msg = Printer()
# Lines listed per kind of note; repairs are all listed.
_NOTES_SHOWN = 5
# Extensions that name a text format, dropped from the name of a converted file; others
# (.train, .dev, .test: Weibo's and People's Daily's splits) are kept.
FORMAT_SUFFIXES = frozenset((".txt", ".json", ".jsonl", ".bmes", ".bio", ".bioes", ".iob", ".conll", ".tsv", ".csv"))


def _choices(name: str, values: Sequence[str], doc: str) -> Type[Enum]:
    """A str Enum of the values a module accepts, as typer takes a choice option; the values
    come from the module, so the CLI offers what the function behind it takes."""
    choices = Enum(name, [(value, value) for value in values], type=str)
    choices.__doc__ = doc
    return choices


InputFormat = _choices("InputFormat", FORMATS, "Input formats of `convert`.")
TagScheme = _choices("TagScheme", INPUT_SCHEMES, "Tag schemes of the one-character-per-line formats.")
ExportFormat = _choices("ExportFormat", EXPORT_FORMATS, "Output formats of `export`.")
ExportScheme = _choices("ExportScheme", EXPORT_SCHEMES, "Tag schemes `export --format chars` writes.")
Pairing = _choices("Pairing", PAIRINGS, "How `robustness` joins test sentences.")
AnnotateEngine = _choices("AnnotateEngine", ENGINES, "Where `annotate` runs.")
AnnotateOutput = _choices("AnnotateOutput", list(OUTPUT_FORMATS), "Output formats of `annotate`.")
SelectStrategy = _choices("SelectStrategy", STRATEGIES, "How `select` ranks texts.")
SelectFormat = _choices("SelectFormat", SELECT_FORMATS, "Output formats of `select`.")


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
        help="Output .spacy file, or an existing folder: writes <folder>/<input name>.spacy, the input's "
        "extension dropped when it is a text format's (.txt, .json, .bmes...), so that "
        "weiboNER_2nd_conll.train and .dev do not overwrite each other.",
    ),
    format: InputFormat = typer.Option(
        InputFormat("auto"), "--format", "-f",
        help="chars: `char tag` lines; chars-seg: `科0 tag` lines (Weibo); cluener, doccano, "
        "prodigy: JSON lines; labelstudio: Label Studio's JSON export; auto: detect from the "
        "content.",
    ),
    scheme: TagScheme = typer.Option(
        TagScheme("auto"), "--scheme", "-s",
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
        output_path = output_path / f"{output_name(input_path)}.spacy"
    stats = ConversionStats(path=str(input_path))
    # user_data: the records' ids, which `export --format doccano` writes back.
    doc_bin = DocBin(attrs=["ORTH", "ENT_IOB", "ENT_TYPE"], store_user_data=True)
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
    if output_path.exists():
        msg.warn(f"Overwriting {output_path}")
    output_path.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(output_path)
    print_stats(stats)
    msg.good(f"Saved {stats.n_sentences} docs to {output_path}")


def output_name(input_path: Path) -> str:
    """The name of input_path's converted file in an output folder, without .spacy."""
    return input_path.stem if input_path.suffix.lower() in FORMAT_SUFFIXES else input_path.name


def _count(n: int, one: str, many: Optional[str] = None) -> str:
    """'1 sentence', '2 sentences'."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def print_stats(stats: ConversionStats) -> None:
    """Print the counts, the per-type entity table and every repair of a conversion."""
    scheme = f", scheme {stats.scheme}" if stats.scheme else ""
    msg.divider(f"{stats.path} (format {stats.format}{scheme})")
    msg.info(
        f"{_count(stats.n_sentences, 'sentence')}, {_count(stats.n_chars, 'character')}, "
        f"{_count(stats.n_entities, 'entity', 'entities')}"
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
    if stats.notes:
        msg.info(f"{len(stats.notes)} notes (nothing changed)")
        msg.table(sorted(stats.note_counts.items()), header=("note", "count"), divider=True,
                  aligns=("l", "r"))
        for kind in sorted(stats.note_counts):
            notes = [note for note in stats.notes if note.kind == kind]
            for note in notes[:_NOTES_SHOWN]:
                print(f"{stats.path}:{note.line}: [{kind}] {note.message}")
            if len(notes) > _NOTES_SHOWN:
                print(f"... and {len(notes) - _NOTES_SHOWN} more [{kind}]")
    if stats.repairs:
        msg.warn(f"{stats.n_repairs} repairs")
        rows = sorted(stats.repair_counts.items())
        msg.table(rows, header=("repair", "count"), divider=True, aligns=("l", "r"))
        for repair in sorted(stats.repairs, key=lambda repair: repair.line):
            print(f"{stats.path}:{repair.line}: [{repair.kind}] {repair.message}")


@app.command("export")
def export_command(
    input_path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="Input corpus (.spacy DocBin)."
    ),
    output_path: Path = typer.Argument(..., help="Output file."),
    format: ExportFormat = typer.Option(
        ExportFormat("chars"), "--format", "-f",
        help="chars: `token<TAB>tag` lines; cluener or doccano: JSON lines.",
    ),
    scheme: ExportScheme = typer.Option(
        ExportScheme("bioes"), "--scheme", "-s", help="Tag scheme of --format chars."
    ),
) -> None:
    """Write a DocBin's docs and entities in a format `convert` (and annotation tools) read."""
    from spacy.vocab import Vocab

    from .corpus.export import export_docs

    docs = DocBin().from_disk(input_path).get_docs(Vocab())
    output_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        stats = export_docs(docs, output_path, format=format.value, scheme=scheme.value)
    except ValueError as err:
        msg.fail("Export failed")
        print(f"{input_path}: {err}")
        raise typer.Exit(code=1)
    unannotated = f" ({stats.n_unannotated} without entity annotation)" if stats.n_unannotated else ""
    msg.good(
        f"Saved {stats.n_docs} docs{unannotated}, {stats.n_entities} entities to {output_path}"
    )


@app.command("fetch-assets")
def fetch_assets_command(
    project_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="project.yml"),
    local: Optional[Path] = typer.Option(
        None, "--local", help="Folder laid out like assets/ to copy from before downloading."
    ),
    dest: str = typer.Option("assets", "--dest", help="Only the assets under this path."),
) -> None:
    """Fetch project.yml's assets: copy from --local if there, else download; verify checksums."""
    project_root = project_file.resolve().parent
    assets = [
        asset
        for asset in srsly.read_yaml(project_file).get("assets", [])
        if Path(asset["dest"]).is_relative_to(dest)
    ]
    if not assets:
        # A dataset of the user's own, placed under dest by hand: nothing to fetch.
        own = sorted(path.name for path in (project_root / dest).glob("*") if path.is_file())
        if own:
            msg.good(f"{dest}: no asset in {project_file}; using the files there ({', '.join(own)})")
            return
        msg.fail(
            f"No asset in {project_file} has a dest under {dest!r}, and {project_root / dest} holds no files. "
            "For a dataset of your own, put its files there and name them with --vars.train_file, "
            "--vars.dev_file and --vars.test_file.",
            exits=1,
        )
    for asset in assets:
        try:
            how = fetch_asset(asset, project_root, local)
        except (OSError, ValueError) as err:
            msg.fail(f"Could not fetch {asset['dest']}")
            print(err)
            raise typer.Exit(code=1)
        msg.good(f"{asset['dest']}: {how}")


def fetch_asset(asset: Dict[str, str], project_root: Path, local: Optional[Path]) -> str:
    """Place one asset at its dest, from a local folder or its URL.

    asset (Dict[str, str]): A project.yml asset with dest, url and optional checksum (md5).
    project_root (Path): The folder that dest is relative to.
    local (Optional[Path]): A folder holding the asset at dest's path below "assets/".
    RETURNS (str): What was done, e.g. "copied from ../shared/data/resume/train.char.bmes".
    """
    dest = project_root / asset["dest"]
    checksum = asset.get("checksum")
    if dest.exists() and (checksum is None or _md5(dest) == checksum):
        return "already present"
    source = local / Path(asset["dest"]).relative_to("assets") if local is not None else None
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source is not None and source.exists():
        shutil.copyfile(source, dest)
        how = f"copied from {source}"
    else:
        tried = f" (not found at {source})" if source is not None else ""
        try:
            with urllib.request.urlopen(asset["url"], timeout=60) as response:
                dest.write_bytes(response.read())
        except OSError as err:
            raise OSError(
                f"Download of {asset['url']} failed ({err}){tried}. Offline, put the file at "
                f"the --local path, e.g. --local ../shared/data."
            ) from err
        how = f"downloaded from {asset['url']}"
    if checksum is not None and _md5(dest) != checksum:
        actual = _md5(dest)
        dest.unlink()
        raise ValueError(
            f"{dest}: md5 {actual} does not match the expected {checksum} ({how}). "
            "The file is corrupt or a different version; it was removed."
        )
    return how


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as file_:
        for block in iter(lambda: file_.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@app.command("show-ents")
def show_ents_command(
    model: str = typer.Argument(..., help="Pipeline name or path."),
    text: str = typer.Argument(..., help="Text to tag."),
) -> None:
    """Print the entities a pipeline finds in a text."""
    import spacy

    doc = spacy.load(model)(text)
    msg.info(text)
    rows = [(ent.text, ent.label_, str(ent.start_char), str(ent.end_char)) for ent in doc.ents]
    print(display_table(rows, header=("entity", "label", "start", "end"), aligns="llrr"))


def display_width(text: str) -> int:
    """Columns a text takes in a terminal: 2 for wide and full-width characters (CJK), 0 for combining marks."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
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
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Test corpus (.spacy), sentences in file order."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for metrics.json and report.html."),
    pairing: Pairing = typer.Option(Pairing("adjacent"), "--pairing", help="Which sentences to join."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random pairing."),
    batch_size: int = typer.Option(256, "--batch-size", help="Texts per nlp.pipe batch."),
    max_examples: int = typer.Option(200, "--max-examples", help="Changed samples shown in the report."),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU to run on; -1 for CPU."),
) -> None:
    """Sentence-level robustness: S-, P-, R-F1 and Asr of a pipeline when test sentences are joined."""
    import spacy
    from spacy.cli._util import setup_gpu

    from .robustness.metrics import evaluate_robustness
    from .robustness.report import render_report

    try:
        setup_gpu(gpu_id)
    except ValueError as err:  # no CuPy, or no GPU: one line, as annotate gives
        msg.fail(f"--gpu-id {gpu_id}: {err}. Install CuPy (pip install \"spacy-cner[cuda]\") on a machine "
                 "with a CUDA GPU, or leave --gpu-id out to run on the CPU.", exits=1)
    nlp = spacy.load(model)
    docs = list(DocBin().from_disk(data).get_docs(nlp.vocab))
    if len(docs) < 2:
        msg.fail(f"{data} holds {len(docs)} doc(s); joining sentences needs at least 2.", exits=1)
    msg.info(f"{len(docs)} sentences from {data}, {pairing.value} pairs")
    try:
        scores = evaluate_robustness(nlp, docs, pairing.value, seed, batch_size, progress=True)
    except ValueError as err:
        msg.fail(f"{data}: {err}", exits=1)
    output.mkdir(parents=True, exist_ok=True)
    result = scores.to_dict()
    result.update({"model": model, "data": str(data), "pairing": pairing.value, "seed": seed})
    srsly.write_json(output / "metrics.json", result)
    (output / "report.html").write_text(render_report(scores, model, max_examples), encoding="utf8")
    rows = [(name, f"{result[key]['p'] * 100:.2f}", f"{result[key]['r'] * 100:.2f}", f"{result[key]['f'] * 100:.2f}")
            for key, name in (("standard", "S-F1"), ("perturbed", "P-F1"), ("robust", "R-F1"))]
    msg.table(rows, header=("metric", "P", "R", "F1"), divider=True)
    msg.good(
        f"Asr {scores.attack_success_rate * 100:.3f}% ({scores.n_changed_chars} of {scores.n_chars} characters), "
        f"{len(scores.changed)} changed entities; wrote {output / 'metrics.json'} and {output / 'report.html'}"
    )


@app.command("annotate")
def annotate_command(
    model: str = typer.Argument(..., help="Pipeline name or path."),
    input_path: str = typer.Argument(..., metavar="INPUT", help="A .txt (one doc per line), .jsonl (a 'text' field), .parquet, .csv or .tsv file (a 'text' column), a folder of them, or a glob."),
    output: Path = typer.Argument(..., help="Folder for the output shards; rerun with the same settings to resume."),
    output_format: AnnotateOutput = typer.Option(AnnotateOutput("jsonl"), "--format", "-f", help="Output shards: JSONL, Parquet or DocBin."),
    input_format: str = typer.Option("auto", "--input-format", help="auto (by suffix), txt, jsonl, parquet, csv or tsv."),
    text_column: str = typer.Option("text", "--text-column", help="The field or column holding the text (JSONL, Parquet, CSV, TSV)."),
    shard_size: int = typer.Option(10_000, "--shard-size", help="Rows per output shard, the unit a restart skips."),
    batch_size: int = typer.Option(256, "--batch-size", help="Texts per nlp.pipe batch (per Ray batch)."),
    n_process: int = typer.Option(1, "--n-process", help="Local engine: nlp.pipe processes."),
    entities_field: str = typer.Option("entities", "--entities-field", help="Output field holding the entities."),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="Local engine: GPU to run on; -1 for CPU."),
    engine: AnnotateEngine = typer.Option(AnnotateEngine("local"), "--engine", help="local (nlp.pipe) or ray (Ray Data)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray: cluster address ('auto' joins a running one); default starts a local Ray."),
    workers: int = typer.Option(1, "--workers", help="Ray: actors, each loading the pipeline once."),
    gpus_per_worker: float = typer.Option(0.0, "--gpus-per-worker", help="Ray: GPUs per actor."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Annotate a corpus: entities (start, end, label, text, score) for every row, resumable, locally or on Ray."""
    from .annotate import annotate

    try:
        summary = annotate(
            model, input_path, output, output_format=output_format.value, input_format=input_format,
            shard_size=shard_size, batch_size=batch_size, n_process=n_process, entities_field=entities_field,
            text_field=text_column, gpu_id=gpu_id, engine=engine.value, address=address, workers=workers, gpus_per_worker=gpus_per_worker,
            progress=not quiet,
        )
    except (ValueError, ImportError) as err:
        msg.fail(str(err), exits=1)
    msg.good(
        f"{summary.docs} docs ({summary.chars:,} characters) in {summary.seconds:.1f} s"
        + (f" ({summary.load_seconds:.1f} s of them loading the pipeline)" if summary.load_seconds else "")
        + f": {summary.docs_per_second:,.0f} docs/s, {summary.chars_per_second:,.0f} chars/s; "
        f"{summary.shards_written} shards written, {summary.shards_skipped} already done, in {output}"
    )
    if summary.errors:
        msg.warn(f"{summary.errors} rows could not be annotated: they are in the output with an 'error' field.")


@app.command("select")
def select_command(
    model: str = typer.Argument(..., help="Pipeline name or path, with a crf_ner component."),
    input_path: str = typer.Argument(..., metavar="INPUT", help="Unlabelled texts, as `annotate` reads them: a .txt (one per line), .jsonl (a 'text' field) or .parquet file, a folder of them, or a glob."),
    n: int = typer.Option(..., "-n", "--n", help="How many texts to select."),
    output: Path = typer.Option(..., "-o", "--output", help="Output file (.json for Label Studio, else .jsonl)."),
    strategy: SelectStrategy = typer.Option(SelectStrategy("entropy"), "--strategy", "-s", help="How texts are ranked: " + ", ".join(STRATEGIES) + "."),
    output_format: SelectFormat = typer.Option(SelectFormat("jsonl"), "--format", "-f", help="For the annotation tool: " + ", ".join(SELECT_FORMATS) + "."),
    diversity: float = typer.Option(0.7, "--diversity", help="Leave out texts whose character 3-grams overlap a selected one's this much (Jaccard); 0 keeps near-duplicates."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random strategy and of the near-duplicate hashes."),
    batch_size: int = typer.Option(256, "--batch-size", help="Texts per batch through the pipeline."),
    input_format: str = typer.Option("auto", "--input-format", help="auto (by suffix), txt, jsonl, parquet, csv or tsv."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Select the texts most worth annotating next (active learning on crf_ner's marginals), with the
    model's entities pre-filled for Label Studio, doccano, Prodigy or JSONL."""
    from .active_learning import select

    try:
        summary = select(
            model, input_path, n, output, strategy=strategy.value, output_format=output_format.value,
            diversity=diversity or None, seed=seed, batch_size=batch_size, input_format=input_format,
            progress=not quiet,
        )
    except (ValueError, ImportError) as err:
        msg.fail(str(err), exits=1)
    msg.good(
        f"{summary.selected} of {summary.texts} texts selected ({strategy.value}) in {summary.seconds:.1f} s "
        f"({summary.chars_per_second:,.0f} chars/s): {output}"
        + (f"; {summary.near_duplicates} near-duplicates left out" if summary.near_duplicates else "")
    )
    if summary.errors:
        msg.warn(f"{summary.errors} rows could not be read: they are in {output}.errors.jsonl, each naming its file and line.")


# spaCy's `evaluate` (its displaCy pages) and `debug data` (its named-entity checks) find
# NER components by their factory's name, "ner": crf_ner pipes would be skipped silently.
_SPACY_COMMAND = {"context_settings": {"allow_extra_args": True, "ignore_unknown_options": True}, "add_help_option": False}


@app.command("train-vectors")
def train_vectors_command(
    train_path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="The train split (.spacy), as `spacy train` reads it."
    ),
    output_path: Path = typer.Argument(..., help="Folder for the vectors pipeline (--paths.vectors) and summary.json."),
    text: Optional[List[Path]] = typer.Option(
        None, "--text", "-t", exists=True, dir_okay=False, readable=True,
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
    for `--paths.vectors OUTPUT` with `static_vectors = true` (configs/default_vectors.cfg)."""
    from .training.vectors import VectorSettings, train_vectors

    try:
        settings = VectorSettings(width=width, epochs=epochs, min_count=min_count, seed=seed, workers=workers)
        summary = train_vectors([train_path, *(text or [])], output_path, settings)
    except (ValueError, ImportError) as err:
        msg.fail("Training vectors failed")
        print(err)
        raise typer.Exit(code=1)
    msg.good(
        f"Saved {summary.char_vectors:,} character and {summary.bigram_vectors:,} bigram vectors of width "
        f"{width} to {output_path}, from {summary.texts:,} texts ({summary.characters:,} characters)"
    )


@app.command("evaluate", **_SPACY_COMMAND)
def evaluate_command(ctx: typer.Context) -> None:
    """spaCy's `evaluate` (same arguments: MODEL DATA [--displacy-path DIR] ...), with crf_ner
    pipes treated as spaCy's `ner` (--displacy-path writes entities.html; the folder is made
    if missing, where spaCy's would stop)."""
    args = list(ctx.args)
    for i, arg in enumerate(args):
        folder = args[i + 1] if arg in ("--displacy-path", "-dp") and i + 1 < len(args) else None
        folder = arg.split("=", 1)[1] if arg.startswith("--displacy-path=") else folder
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
    _run_spacy_command("evaluate", args)


@app.command("debug-data", **_SPACY_COMMAND)
def debug_data_command(ctx: typer.Context) -> None:
    """spaCy's `debug data` (same arguments: CONFIG [--paths.train ...] ...), with crf_ner pipes
    treated as spaCy's `ner` (its named-entity checks run)."""
    _run_spacy_command("debug", ["data", *ctx.args])


def _run_spacy_command(name: str, args: Sequence[str]) -> None:
    from spacy.cli._util import app as spacy_app

    command = typer.main.get_command(spacy_app)
    with crf_ner_as_ner():
        try:
            command([name, *args], prog_name="python -m spacy_cner", standalone_mode=False)
        except SystemExit as exit_:
            if exit_.code:
                raise typer.Exit(code=exit_.code if isinstance(exit_.code, int) else 1)


@contextmanager
def crf_ner_as_ner() -> Iterator[None]:
    """Within the block, the pipe meta of a crf_ner component names the factory "ner", for
    spaCy tools that find NER components by factory name (evaluate, debug data).

    Patches Language.get_pipe_meta and puts it back after; the pipes themselves are unchanged.
    """
    original = Language.get_pipe_meta

    def get_pipe_meta(self: Language, name: str) -> FactoryMeta:
        meta = original(self, name)
        return dataclasses.replace(meta, factory="ner") if meta.factory == "crf_ner" else meta

    Language.get_pipe_meta = get_pipe_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        Language.get_pipe_meta = original  # type: ignore[method-assign]
