"""`evaluate` and `debug-data`: spaCy's own commands, with crf_ner pipes treated as spaCy's `ner`;
`init-config`: a shipped training config, where `spacy init config -p crf_ner` gives the factory's plain one."""
import dataclasses
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import typer
from spacy.language import FactoryMeta, Language

from ..shipped_configs import config_names, config_path
from ._app import _choices, app, msg

ShippedConfig = _choices("ShippedConfig", config_names(), "The configs `init-config` writes.")


# spaCy's `evaluate` (its displaCy pages) and `debug data` (its named-entity checks) find
# NER components by their factory's name, "ner": crf_ner pipes would be skipped silently.
_SPACY_COMMAND = {"context_settings": {"allow_extra_args": True, "ignore_unknown_options": True}, "add_help_option": False}


@app.command("init-config")
def init_config_command(
    output: str = typer.Argument(..., help="The config file to write ('-': print it)."),
    config: ShippedConfig = typer.Option("default", "--config", "-c", help="Which shipped config."),
    force: bool = typer.Option(False, "--force", "-F", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Write a shipped training config (configs/default.cfg unless --config), for `spacy train`.
    `spacy init config -p crf_ner` gives the factory's plain BiLSTM-CRF instead: no SoftLexicon, no
    vectors, no FGM, no joined pairs, no fitted threshold (spacy_cner/shipped_configs.py says why)."""
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
    msg.good(f"Wrote {path} (configs/{config.value}.cfg)",
             f"Train it: python -m spacy train {path} --paths.train TRAIN.spacy --paths.dev DEV.spacy")


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
