"""`pretrained fetch`, `pretrained vectors` and `pretrained pipeline`: Baidu LAC's weights from its PyPI
sdist, hash-checked."""

from pathlib import Path
from typing import List, Optional

import typer

from ._app import app, file_option, msg
from .checks import fail_on

pretrained_app = typer.Typer(
    help="Pretrained Chinese weights read from Baidu LAC's PyPI sdist (Apache-2.0).", no_args_is_help=True
)
app.add_typer(pretrained_app, name="pretrained")

SDIST_HELP = "A local copy of LAC-2.1.2.tar.gz (checked by sha256); default: fetched through pip's index, cached."


@pretrained_app.command("fetch")
def fetch_command(sdist: Optional[Path] = typer.Option(None, "--sdist", help=SDIST_HELP)) -> None:
    """Fetch (or check) LAC's sdist and print where it is: the cache later commands and trainings read."""
    from ..pretrained.lac import open_lac
    from ..pretrained.fetch import download_progress

    with fail_on(ValueError, RuntimeError, OSError):
        lac = open_lac(sdist, progress=download_progress())
    msg.good(f"LAC 2.1.2 (Apache-2.0): {lac.path}")


@pretrained_app.command("vectors")
def vectors_command(
    output_path: Path = typer.Argument(..., help="Folder for the vectors pipeline (--paths.vectors)."),
    train_path: Optional[Path] = file_option(
        None,
        "--train",
        help="The train split (.spacy): its characters and bigrams LAC lacks are added (see --missing).",
    ),
    text: Optional[List[Path]] = file_option(
        None,
        "--text",
        "-t",
        help="Also unlabeled text of the domain, one per line (repeatable).",
    ),
    missing: str = typer.Option(
        "trained",
        "--missing",
        help="none: LAC's keys only; trained: the corpus's other keys learnt in LAC's space; "
        "concat: self-trained vectors beside LAC's.",
    ),
    sdist: Optional[Path] = typer.Option(None, "--sdist", help=SDIST_HELP),
    seed: int = typer.Option(0, "--seed", help="word2vec's seed (trained, concat)."),
) -> None:
    """Write LAC's character and bigram vectors (128-d) as a vectors pipeline, for --paths.vectors."""
    import spacy

    from ..pretrained.lac import open_lac
    from ..pretrained.fetch import download_progress
    from ..training.lac_vectors import MISSING, combine, credit, lac_table, shared_vectors
    from ..training.vectors import VectorSettings, read_texts

    if missing not in MISSING:
        msg.fail(f"--missing must be one of {', '.join(MISSING)}, got {missing!r}.", exits=1)
    sources = ([train_path] if train_path else []) + list(text or [])
    if missing != "none" and not sources:
        msg.fail(
            f"--missing {missing} learns the keys of a corpus: pass --train (and/or --text), or --missing none.",
            exits=1,
        )
    if output_path.exists() and (not output_path.is_dir() or any(output_path.iterdir())):
        msg.fail(f"{output_path} exists and is not an empty folder: choose a new output folder.", exits=1)
    _check_folder(output_path, "the output folder")
    with fail_on(ValueError, RuntimeError, OSError):
        texts = [line for path in sources for line in read_texts(path)]
        lac = open_lac(sdist, progress=download_progress())
        keys, rows, data, counts = combine(*lac_table(lac), texts, missing, VectorSettings(seed=seed))
    nlp = spacy.blank("zh")
    nlp.vocab.vectors = shared_vectors(nlp.vocab.strings, keys, rows, data, f"zh_lac_{missing}.vectors")
    credit(nlp)
    output_path.mkdir(parents=True, exist_ok=True)  # out/vectors with no out/ yet: spaCy's to_disk makes one level
    nlp.to_disk(output_path)
    msg.good(
        f"{len(keys):,} keys ({counts['lac_keys']:,} LAC's, {counts['added_keys']:,} added), {len(data):,} rows "
        f"of width {data.shape[1]}: {output_path}"
    )


@pretrained_app.command("pipeline")
def pipeline_command(
    output: str = typer.Argument(
        ...,
        help="A package name (zh_lac): the pipeline built as a package and installed with pip, so that "
        "spacy.load('zh_lac') works from any folder. Or a folder path (./zh_lac, out/zh_lac): the pipeline "
        "written there, spacy.load(PATH).",
    ),
    sdist: Optional[Path] = typer.Option(None, "--sdist", help=SDIST_HELP),
    tokens: str = typer.Option(
        "words", "--tokens", help="words: LAC's words as tokens; chars: one token per character."
    ),
    force: bool = typer.Option(
        False, "--force", help="Reinstall the package if installed; rewrite a folder this command wrote."
    ),
    target: Optional[Path] = typer.Option(
        None,
        "--target",
        help="Install the package into this folder (pip install --target; put it on PYTHONPATH), not into this "
        "environment's site-packages.",
    ),
) -> None:
    """A ready pipeline, no training: LAC's tagger in torch gives words, POS tags (token.tag_) and
    PER/LOC/ORG/TIME entities (doc.ents, with ent._.score); installed as a package (or written to a folder), its
    weights inside, so loading needs no sdist."""
    from ..pretrained.lac import open_lac
    from ..pretrained.lac_package import check_package_name, install_wheel, installed_version, write_wheel
    from ..pretrained.lac_pipeline import TOKENS, build_pipeline, is_lac_pipeline
    from ..pretrained.fetch import download_progress

    if tokens not in TOKENS:
        msg.fail(f"--tokens must be one of {', '.join(TOKENS)}, got {tokens!r}.", exits=1)
    as_package = not any(mark in output for mark in ("/", "\\", ".", "~"))
    if as_package:
        try:
            check_package_name(output)
        except ValueError as err:
            msg.fail(str(err), exits=1)
        present = installed_version(output, target)
        if present is not None and not force:
            msg.fail(f"{output} {present} is installed: --force rebuilds and reinstalls it.", exits=1)
        if target is not None:
            _check_folder(target, "--target")
    else:
        if target is not None:
            msg.fail("--target installs a package: give a package name (zh_lac), not a folder path.", exits=1)
        folder = Path(output).expanduser()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            if not (force and is_lac_pipeline(folder)):
                msg.fail(
                    f"{folder} exists and is not an empty folder"
                    + (
                        " nor a pipeline this command wrote"
                        if force
                        else " (--force rewrites a pipeline this command wrote)"
                    )
                    + ": choose a new output folder.",
                    exits=1,
                )
        _check_folder(folder, "the output folder")
    with fail_on(ValueError, RuntimeError, OSError):
        nlp = build_pipeline(open_lac(sdist, progress=download_progress()), tokens=tokens)
    example_text = "百度是一家高科技公司"
    if not as_package:
        folder.mkdir(parents=True, exist_ok=True)  # out/zh_lac with no out/ yet: spaCy's to_disk makes one level
        nlp.to_disk(folder)
        msg.good(f"LAC's tagger (tokens: {tokens}): {folder}")
        msg.text(f"spacy.load('{folder}')('{example_text}'): {_example(nlp(example_text))}")
        return
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        with fail_on(ValueError, RuntimeError, OSError):
            install_wheel(write_wheel(nlp, output, scratch), force=force, target=target)
    msg.good(f"Installed {output} {installed_version(output, target)} (LAC's tagger, tokens: {tokens})")
    msg.text(f"spacy.load('{output}')('{example_text}'): {_example(nlp(example_text))}")


def _example(doc) -> str:
    return (
        " ".join(f"{token.text}/{token.tag_}" for token in doc)
        + "; ents "
        + ", ".join(f"{ent.text}/{ent.label_} {ent._.score:.3f}" for ent in doc.ents)
    )


def _check_folder(folder: Path, what: str) -> None:
    """One line, before the build, where folder cannot be written (issue 85)."""
    from .checks import check_output

    check_output(folder, folder=True, what=what)
