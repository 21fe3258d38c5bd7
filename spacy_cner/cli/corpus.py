"""`convert`, `export` and `fetch-assets`: corpora into .spacy files and back, and the datasets project.yml names."""

import hashlib
import shutil
import urllib.request
from pathlib import Path
from typing import Dict, Optional

import srsly
import typer
from spacy.tokens import DocBin

from ..corpus.convert import ConversionStats, iter_docs

from ._app import ExportFormat, ExportScheme, InputFormat, TagScheme, app, msg
from .checks import check_output, read_docbin


# Lines listed per kind of note; repairs are all listed.
_NOTES_SHOWN = 5


# Extensions that name a text format, dropped from the name of a converted file; others
# (.train, .dev, .test: Weibo's and People's Daily's splits) are kept.
FORMAT_SUFFIXES = frozenset((".txt", ".json", ".jsonl", ".bmes", ".bio", ".bioes", ".iob", ".conll", ".tsv", ".csv"))


@app.command("convert")
def convert_command(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="Input NER file."),
    output_path: Path = typer.Argument(
        ...,
        help="Output .spacy file, or an existing folder: writes <folder>/<input name>.spacy, the input's "
        "extension dropped when it is a text format's (.txt, .json, .bmes...), so that "
        "weiboNER_2nd_conll.train and .dev do not overwrite each other.",
    ),
    format: InputFormat = typer.Option(
        InputFormat("auto"),
        "--format",
        "-f",
        help="chars: `char tag` lines; chars-seg: `科0 tag` lines (Weibo); cluener, doccano, "
        "prodigy: JSON lines; labelstudio: Label Studio's JSON export; auto: detect from the "
        "content.",
    ),
    scheme: TagScheme = typer.Option(
        TagScheme("auto"),
        "--scheme",
        "-s",
        help="Tag scheme of chars/chars-seg: bio (IOB2), iob (IOB1), bmes, bioes; "
        "auto: bmes/bioes if any M-/E-/S- tag occurs, else bio.",
    ),
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Repair malformed input and report every repair, instead of failing.",
    ),
) -> None:
    """Convert a character-level NER file into a spaCy DocBin (.spacy), one Doc per sentence."""
    if output_path.is_dir():
        output_path = output_path / f"{output_name(input_path)}.spacy"
    if output_path.resolve() == input_path.resolve():
        msg.fail(f"The output {output_path} is the input file: name another, so that the input is kept.", exits=1)
    check_output(output_path, folder=False)
    stats = ConversionStats(path=str(input_path))
    # user_data: the records' ids, which `export --format doccano` writes back.
    doc_bin = DocBin(attrs=["ORTH", "ENT_IOB", "ENT_TYPE"], store_user_data=True)
    try:
        for doc in iter_docs(input_path, format=format.value, scheme=scheme.value, repair=repair, stats=stats):
            doc_bin.add(doc)
    except ValueError as err:
        # Unwrapped, so that `file:line:` stays intact for editors and grep.
        msg.fail("Conversion failed")
        print(err)
        raise typer.Exit(code=1)
    if output_path.exists():
        msg.warn(f"Overwriting {output_path}")
    try:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        doc_bin.to_disk(output_path)
    except OSError as err:  # checked before the work; a disk that filled up since
        msg.fail(f"Cannot write {output_path}: {err}", exits=1)
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
            f'{stats.n_unannotated} sentences have no "label": their entity annotation is '
            f"missing (not O), so they cannot be used to train or evaluate NER"
        )
    if stats.entity_counts:
        rows = sorted(stats.entity_counts.items())
        rows.append(("total", stats.n_entities))
        msg.table(rows, header=("type", "entities"), divider=True, aligns=("l", "r"))
    if stats.notes:
        msg.info(f"{len(stats.notes)} notes (nothing changed)")
        msg.table(sorted(stats.note_counts.items()), header=("note", "count"), divider=True, aligns=("l", "r"))
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
        ExportFormat("chars"),
        "--format",
        "-f",
        help="chars: `token<TAB>tag` lines; cluener, doccano or prodigy: JSON lines; labelstudio: "
        "a JSON array of tasks (Label Studio's import).",
    ),
    scheme: ExportScheme = typer.Option(ExportScheme("bioes"), "--scheme", "-s", help="Tag scheme of --format chars."),
) -> None:
    """Write a DocBin's docs and entities in a format `convert` (and annotation tools) read."""
    from spacy.vocab import Vocab

    from ..corpus.export import export_docs

    if output_path.resolve() == input_path.resolve():
        msg.fail(f"The output {output_path} is the input file: name another, so that the input is kept.", exits=1)
    check_output(output_path, folder=False)
    docs = read_docbin(input_path).get_docs(Vocab())
    try:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        stats = export_docs(docs, output_path, format=format.value, scheme=scheme.value)
    except OSError as err:  # checked before the work; a disk that filled up since
        msg.fail(f"Cannot write {output_path}: {err}", exits=1)
    except ValueError as err:
        msg.fail("Export failed")
        print(f"{input_path}: {err}")
        raise typer.Exit(code=1)
    unannotated = f" ({stats.n_unannotated} without entity annotation)" if stats.n_unannotated else ""
    msg.good(f"Saved {stats.n_docs} docs{unannotated}, {stats.n_entities} entities to {output_path}")


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
        asset for asset in srsly.read_yaml(project_file).get("assets", []) if Path(asset["dest"]).is_relative_to(dest)
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
