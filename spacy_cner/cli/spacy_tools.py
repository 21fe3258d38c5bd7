"""`evaluate` and `debug-data`: spaCy's own commands, with crf_ner pipes treated as spaCy's `ner`;
`init-config`: a shipped training config, where `spacy init config -p crf_ner` gives the factory's plain one;
`package`: spaCy's `package`, its build's log shown only where the build fails."""

import copy
import dataclasses
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import srsly
import typer
from spacy.language import FactoryMeta, Language

from ..training.shipped_configs import config_names, config_path
from ._app import _choices, app, msg
from .checks import check_output

ShippedConfig = _choices("ShippedConfig", config_names(), "The configs `init-config` writes.")


# spaCy's `evaluate` (its displaCy pages) and `debug data` (its named-entity checks) find
# NER components by their factory's name, "ner": crf_ner pipes would be skipped silently.
_SPACY_COMMAND = {
    "context_settings": {"allow_extra_args": True, "ignore_unknown_options": True},
    "add_help_option": False,
}


@app.command("init-config")
def init_config_command(
    output: str = typer.Argument(..., help="The config file to write ('-': print it)."),
    config: ShippedConfig = typer.Option("default", "--config", "-c", help="Which shipped config."),
    force: bool = typer.Option(False, "--force", "-F", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Write a shipped training config (configs/default.cfg unless --config), for `spacy train`.
    `spacy init config -p crf_ner` gives the factory's plain BiLSTM-CRF instead: no SoftLexicon, no
    vectors, no FGM, no joined pairs, no fitted threshold (spacy_cner/training/shipped_configs.py says why)."""
    text = config_path(config.value).read_text(encoding="utf8")
    if output == "-":
        typer.echo(text, nl=False)
        return
    path = Path(output)
    if path.is_dir():
        msg.fail(f"{path} is a folder: name the config file to write, e.g. {path / 'config.cfg'}", exits=1)
    if path.exists() and not force:
        msg.fail(f"{path} exists: pass --force to overwrite it", exits=1)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf8")
    except OSError as err:  # a parent that is a file, a place that cannot be written
        msg.fail(f"Cannot write {path}: {err}", exits=1)
    msg.good(
        f"Wrote {path} (configs/{config.value}.cfg)",
        f"Train it: python -m spacy train {path} --paths.train TRAIN.spacy --paths.dev DEV.spacy",
    )


EVALUATE_HELP = (
    "Score a pipeline on a .spacy corpus: spaCy's `evaluate` (its arguments and options), with crf_ner pipes "
    "treated as spaCy's `ner`: entity precision, recall and F1, overall and per label; --output writes them as "
    "JSON; --displacy-path writes a sample of the docs' entities, rendered by displaCy, as entities.html (the "
    "folder is made if missing, where spaCy's would stop)."
)
DEBUG_DATA_HELP = (
    "Check a training config's data: spaCy's `debug data` (its arguments and options, and config overrides such "
    "as --paths.train), with crf_ner pipes treated as spaCy's `ner`, so that its named-entity checks run "
    "(labels, entities per label, entities crossing token boundaries, low-data labels)."
)
# Options of spaCy's `evaluate` whose help speaks of dependency parses.
_EVALUATE_OPTION_HELP = {
    "displacy_path": "Folder for entities.html, a sample of the docs' entities rendered by displaCy",
    "displacy_limit": "Docs rendered in entities.html",
}


@app.command("evaluate", help=EVALUATE_HELP, **_SPACY_COMMAND)
def evaluate_command(ctx: typer.Context) -> None:
    args = list(ctx.args)
    if _wants_help(args):
        _print_spacy_help(("evaluate",), "evaluate", EVALUATE_HELP, _EVALUATE_OPTION_HELP)
        return
    # Before the evaluation: outputs that cannot be written fail in one line (spaCy's would, after it, in a
    # traceback); the displaCy folder is made (spaCy's option requires it to exist).
    for output in _option_values(args, ("--output", "-o")):
        check_output(output, folder=False, what="--output")
    folders = _option_values(args, ("--displacy-path", "-dp"))
    for folder in folders:
        check_output(folder, folder=True, what="--displacy-path")
    for folder in folders:
        Path(folder).mkdir(parents=True, exist_ok=True)
    _run_spacy_command("evaluate", args)


@app.command("debug-data", help=DEBUG_DATA_HELP, **_SPACY_COMMAND)
def debug_data_command(ctx: typer.Context) -> None:
    if _wants_help(ctx.args):
        _print_spacy_help(("debug", "data"), "debug-data", DEBUG_DATA_HELP)
        return
    _run_spacy_command("debug", ["data", *ctx.args])


def _option_values(args: Sequence[str], names: Sequence[str]) -> List[str]:
    """The values given to an option of a passed-through command: `NAME VALUE` or `--name=VALUE`."""
    values = []
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            values.append(args[i + 1])
        elif "=" in arg and arg.split("=", 1)[0] in names:
            values.append(arg.split("=", 1)[1])
    return values


def _wants_help(args: Sequence[str]) -> bool:
    return "--help" in args or "-h" in args


def _print_spacy_help(
    path: Sequence[str], name: str, description: str, option_help: Optional[Dict[str, str]] = None
) -> None:
    """Print the help of spaCy's command at path (("debug", "data")) as this app's command `name` shows it: its
    usage line under this name, this description, spaCy's arguments and options (their help from option_help,
    by parameter name, where spaCy's speaks of something else)."""
    import click
    from spacy.cli import app as spacy_app

    command = typer.main.get_command(spacy_app)
    for part in path:
        command = command.get_command(click.Context(command), part)  # type: ignore[attr-defined]
    command = copy.copy(command)
    command.help = description
    params = []
    for param in command.params:
        if option_help and param.name in option_help:
            param = copy.copy(param)
            param.help = option_help[param.name]  # type: ignore[attr-defined]
        params.append(param)
    command.params = params
    with click.Context(command, info_name=f"python -m spacy_cner {name}") as help_ctx:
        typer.echo(command.get_help(help_ctx))


@app.command("package")
def package_command(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="The pipeline folder (e.g. model-best)."),
    output: Path = typer.Argument(..., exists=True, file_okay=False, help="The folder to write the package into."),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="The package name (overrides meta.json's)."),
    version: Optional[str] = typer.Option(None, "--version", "-v", help="The package version (overrides meta.json's)."),
    build: str = typer.Option("sdist", "--build", "-b", help="Comma-separated: sdist and/or wheel, or none."),
    code: str = typer.Option("", "--code", "-c", help="Comma-separated Python files with registered functions."),
    meta_path: Optional[Path] = typer.Option(
        None, "--meta-path", "-m", exists=True, dir_okay=False, help="A meta.json to use instead of MODEL's."
    ),
    force: bool = typer.Option(False, "--force", "-F", help="Overwrite the package folder if it exists."),
    require_parent: bool = typer.Option(
        True, "--require-parent/--no-require-parent", help="List spaCy among the package's requirements."
    ),
    isolation: bool = typer.Option(
        True,
        "--isolation/--no-isolation",
        help="Build in a fresh environment (needs the package index for setuptools); "
        "--no-isolation builds with this environment's setuptools, offline.",
    ),
) -> None:
    """spaCy's `package` (the same package folder, meta, README and requirements, by spaCy's own
    function), then `python -m build`, whose log (~70 lines of setuptools' file copying, which spaCy
    passes through) is printed only where the build fails. spaCy's command has no option for it."""
    from spacy.cli.package import get_build_formats, package

    from .arguments import string_to_list

    sdist, wheel = get_build_formats(string_to_list(build))
    package(
        model,
        output,
        meta_path=meta_path,
        code_paths=[Path(p.strip()) for p in string_to_list(code)],
        name=name,
        version=version,
        create_sdist=False,
        create_wheel=False,
        force=force,
        require_parent=require_parent,
        silent=False,
    )
    main_path = output / package_folder_name(srsly.read_json(meta_path or model / "meta.json"), name, version)
    formats = ["--sdist"] * sdist + ["--wheel"] * wheel
    if formats:
        for path in build_quietly(main_path, formats, isolation):
            msg.good("Built", path)


def package_folder_name(meta: dict, name: Optional[str], version: Optional[str]) -> str:
    """The folder spacy.cli.package.package writes the package into: lang_name-version."""
    name = name or meta["name"]
    lang = meta["lang"]
    return f"{name if name.startswith(lang + '_') else f'{lang}_{name}'}-{version or meta['version']}"


def build_quietly(folder: Path, formats: List[str], isolation: bool = True) -> List[Path]:
    """Run `python -m build` in folder, its output captured: printed, and the command exits 1, where it fails.

    folder (Path): A package folder with its setup.py.
    formats (List[str]): "--sdist" and/or "--wheel".
    isolation (bool): Build in a fresh environment (False: --no-isolation).
    RETURNS (List[Path]): The files built, in folder/dist.
    """
    dist = folder / "dist"
    before = {(path, path.stat().st_mtime_ns) for path in dist.iterdir()} if dist.is_dir() else set()
    command = [sys.executable, "-m", "build", *formats, *([] if isolation else ["--no-isolation"]), "."]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout + result.stderr, file=sys.stderr)
        hint = "" if not isolation else " Offline? --no-isolation builds with this environment's setuptools."
        msg.fail(
            f"`python {' '.join(command[1:])}` failed in {folder} (exit {result.returncode}): its log is above.{hint}",
            exits=1,
        )
    return [path for path in sorted(dist.iterdir()) if (path, path.stat().st_mtime_ns) not in before]


def _run_spacy_command(name: str, args: Sequence[str]) -> None:
    from spacy.cli import app as spacy_app

    command = typer.main.get_command(spacy_app)
    with crf_ner_as_ner():
        try:
            command([name, *args], prog_name="python -m spacy_cner", standalone_mode=False)
        except SystemExit as exit_:
            if exit_.code:
                raise typer.Exit(code=exit_.code if isinstance(exit_.code, int) else 1)
        except OSError as err:  # a mistyped pipeline name or path (E050), a folder that is no pipeline: one line
            msg.fail(f"{'debug-data' if name == 'debug' else name}: {err}", exits=1)


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
