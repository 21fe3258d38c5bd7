"""Checks the commands make before their work, each failing in one line (no traceback): the pipeline loads,
the input corpus is a DocBin, the output can be written.

`output_problem` / `check_output` are for every command that writes a file or a folder: call them before a
long build or run, so that a path that cannot be written (a file where a folder is needed, a folder where a
file is, a read-only place) is said at once, not after the work as an OSError's traceback. They create
nothing: a failing command leaves no empty folder behind.
"""

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional, Type, Union

from ._app import msg

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import DocBin


@contextmanager
def fail_on(*errors: Type[BaseException]) -> Iterator[None]:
    """Say an error of these kinds in one line (its message) and exit with 1, instead of a traceback: the
    errors a command's work raises for what the user gave it (a bad input, a path that cannot be written,
    an extra not installed). Any other error still shows its traceback: that one is a bug.

    errors (Type[BaseException]): The kinds of error to say.
    """
    try:
        yield
    except errors as err:
        msg.fail(str(err), exits=1)


def load_pipeline(model: Union[str, Path]) -> "Language":
    """spacy.load(model), or one line naming the model where it cannot be loaded (a mistyped name or path, a
    folder that is no pipeline), as annotate and select say it."""
    import spacy

    try:
        return spacy.load(model)
    except OSError as err:
        msg.fail(f"Cannot load the pipeline {str(model)!r}: {err}", exits=1)
        raise  # not reached: msg.fail exits


def output_problem(path: Union[str, Path], folder: bool) -> Optional[str]:
    """Why the output path cannot be written, or None where it can.

    path (Union[str, Path]): The output: a file to write (folder=False) or a folder to write into (made with
        its parents where missing).
    folder (bool): Whether the output is a folder.
    RETURNS (Optional[str]): Why, for "Cannot write PATH: ..." ("it is a file, not a folder"), or None.
    """
    path = Path(path)
    if path.exists():
        if folder and not path.is_dir():
            return "it is a file, not a folder"
        if not folder and path.is_dir():
            return "it is a folder: name a file"
        if not folder:  # access(2) says EROFS on a read-only mount, root or not
            return None if os.access(path, os.W_OK) else "it is not writable"
        return _probe(path)
    # The nearest existing ancestor: the folders below it are made by the command.
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, not a folder"
    return _probe(ancestor)


def check_output(path: Union[str, Path], folder: bool, what: str = "the output") -> None:
    """Fail in one line (exit 1) where output_problem finds one; what: the output's name in the message, e.g.
    "--displacy-path"."""
    problem = output_problem(path, folder)
    if problem is not None:
        msg.fail(f"Cannot write {what} {path}: {problem}.", exits=1)


def _probe(folder: Path) -> Optional[str]:
    """Whether a file can be made in folder (a read-only file system, permissions; os.access is not enough:
    it says yes to root on a read-only mount): a temporary file, removed at once."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        return f"nothing can be written in {folder} ({err.strerror or err})"
    return None


def positional_output(output: Optional[Path], option: Optional[Path], usage: str) -> Path:
    """The output of a command that took it as `-o/--output` and takes it as an argument now, as the others do
    (convert, export, annotate, train-vectors, init-config, package): the option still works, with a warning.

    output (Optional[Path]): The OUTPUT argument.
    option (Optional[Path]): The deprecated option's value.
    usage (str): The command's arguments, e.g. "robustness MODEL DATA OUTPUT", for the messages.
    RETURNS (Path): The output.
    """
    if option is not None:
        if output is not None:
            msg.fail(f"The output given twice ({output} and --output {option}): give it once, {usage}.", exits=1)
        msg.warn(f"-o/--output is deprecated: give the output as an argument, {usage}, as the other commands do.")
        return option
    if output is None:
        msg.fail(f"Missing the output: {usage}.", exits=1)
    return output  # type: ignore[return-value]  # msg.fail exits


def read_docbin(path: Union[str, Path]) -> "DocBin":
    """DocBin().from_disk(path), or one line naming the file where it is no DocBin (a text file, a damaged or cut
    off one): spaCy's own error speaks of its v2 JSON format, which is seldom what the file is."""
    import zlib

    from spacy.tokens import DocBin

    try:
        return DocBin().from_disk(path)
    except (ValueError, KeyError, TypeError, IndexError, zlib.error) as err:
        reason = f"no {err} field" if isinstance(err, KeyError) else str(err).split(". ", 1)[0].strip()
        msg.fail(
            f"Cannot read {path}: it is not a .spacy (DocBin) file, or a damaged one ({reason}). "
            "`python -m spacy_cner convert` makes one from a text corpus.",
            exits=1,
        )
        raise  # not reached: msg.fail exits
