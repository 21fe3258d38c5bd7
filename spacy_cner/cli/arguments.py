"""Arguments read as spaCy's commands read them: config overrides (`--training.max_steps 100`) and
comma-separated lists (`--build sdist,wheel`).

spaCy parses them with helpers of its private CLI module (`spacy.cli._util`), which no release promises to keep;
these are the same parsers, on the public API only (click, srsly, spacy.util.ENV_VARS), so `distill` takes
the overrides `spacy train` takes, and `package` the lists `spacy package` takes, whatever spaCy moves.
"""

import os
import shlex
from typing import Any, Dict, List, Optional

import click
import srsly
from spacy.util import ENV_VARS

from ._app import msg


def parse_config_overrides(args: List[str], env_var: Optional[str] = ENV_VARS.CONFIG_OVERRIDES) -> Dict[str, Any]:
    """Config overrides from a command's extra arguments, and from the environment variable spaCy reads
    (SPACY_CONFIG_OVERRIDES, which wins), as `spacy train` takes them: `--section.key value`,
    `--section.key=value`, or `--section.key` alone for true; each value read as JSON, else kept as text.

    args (List[str]): The extra arguments (typer's ctx.args).
    env_var (Optional[str]): The environment variable to read too; None: only args.
    RETURNS (Dict[str, Any]): The overrides, by dotted config path.
    Raises click.NoSuchOption for an argument without a section ("--max_steps"), as spaCy's commands do.
    """
    env_string = os.environ.get(env_var, "") if env_var else ""
    env_overrides = _parse_overrides(_split_arg_string(env_string), is_cli=False)
    cli_overrides = _parse_overrides(list(args), is_cli=True)
    return {**cli_overrides, **env_overrides}


def string_to_list(value: str) -> List[str]:
    """The items of a comma-separated value ("sdist,wheel", "[a.py, 'b.py']"), as spaCy's commands read them:
    brackets and each item's quotes dropped, items stripped; "" gives []."""
    if not value:
        return []
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    items = []
    for item in value.split(","):
        item = item.strip()
        for quote in ("'", '"'):
            if item.startswith(quote) and item.endswith(quote):
                item = item[1:-1]
        items.append(item.strip())
    return items


def _parse_overrides(args: List[str], is_cli: bool) -> Dict[str, Any]:
    result = {}
    while args:
        opt = args.pop(0)
        err = f"Invalid config override '{opt}'"
        if not opt.startswith("--"):
            msg.fail(f"{err}: name should start with --", exits=1)
        orig_opt = opt
        opt = opt.replace("--", "")
        if "." not in opt:
            if is_cli:
                raise click.NoSuchOption(orig_opt)
            msg.fail(f"{err}: can't override top-level sections", exits=1)
        if "=" in opt:  # --opt=value
            opt, value = opt.split("=", 1)
            opt = opt.replace("-", "_")
        elif not args or args[0].startswith("--"):  # a flag without a value
            value = "true"
        else:
            value = args.pop(0)
        result[opt] = _parse_override(value)
    return result


def _parse_override(value: str) -> Any:
    """The value as JSON (a number, true, a list), else as the text given: the CLI does not make one quote text."""
    try:
        return srsly.json_loads(value)
    except ValueError:
        return str(value)


def _split_arg_string(string: str) -> List[str]:
    """The words of an environment variable, as a shell splits them (an unclosed quote or a trailing backslash
    taken as it stands, as click reads them, not an error)."""
    lexer = shlex.shlex(string, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: List[str] = []
    try:
        for word in lexer:
            words.append(word)
    except ValueError:
        words.append(lexer.token)
    return words
