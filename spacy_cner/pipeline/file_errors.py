"""spaCy's load errors named by their file: spacy.util.from_disk's readers wrapped, once, when a
pipeline with a spacy-cner component is loaded (importing spacy_cner installs it).

Why a patch and not a wrapper of our own: the files are read inside spaCy (Language.from_disk reads
the vocab, the tokenizer and each component; Vocab and Vectors read their own files), every one of
them through spacy.util.from_disk, looked up as a module attribute at each call. A truncated
`vocab/vectors` raised numpy's "cannot reshape array of size 100 into shape (30,4)" and a damaged
`vocab/strings.json` srsly's "Expected object or value", naming no file. The wrapper changes nothing
but the message of an error (its type kept where the type can be made from a message): the
innermost reader's file is named, and what to do. spaCy reads meta.json and config.cfg through
spacy.util's load_meta and load_config (srsly's "Expected object or value", thinc's "Source contains
parsing errors: '<string>'"): wrapped the same way.
"""

import functools
import re
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Union

import spacy.util
from thinc.config import ConfigValidationError
from srsly.msgpack.exceptions import UnpackException

# Set on an error whose message already names its file: an outer reader passes it on as it is.
_NAMED = "_spacy_cner_names_file"


def name_files_in_load_errors() -> None:
    """Wrap spacy.util.from_disk so that an error of one of its readers names the file it read, and
    spacy.util's readers of a pipeline's meta.json and config.cfg (load_meta, load_config, and
    load_model_from_path for a config.cfg without its [nlp] section) likewise."""
    if getattr(spacy.util.from_disk, _NAMED, False):
        return
    spacy_from_disk = spacy.util.from_disk

    @functools.wraps(spacy_from_disk)
    def from_disk(path: Union[str, Path], readers: Dict[str, Callable[[Path], Any]], exclude: Iterable[str]) -> Path:
        return spacy_from_disk(path, {key: _naming(reader) for key, reader in readers.items()}, exclude)

    setattr(from_disk, _NAMED, True)
    spacy.util.from_disk = from_disk
    spacy.util.load_meta = _naming_meta(spacy.util.load_meta)
    spacy.util.load_config = _naming_config(spacy.util.load_config)
    spacy.util.load_model_from_path = _naming_model_config(spacy.util.load_model_from_path)


def _naming_meta(load_meta: Callable[..., Any]) -> Callable[..., Any]:
    """spacy.util.load_meta, an error of a meta.json that cannot be read (not JSON, not UTF-8, no "lang")
    naming the file: srsly said only "Expected object or value"."""

    @functools.wraps(load_meta)
    def read(path: Union[str, Path]) -> Any:
        try:
            return load_meta(path)
        except DECODE_ERRORS as err:
            if getattr(err, _NAMED, False) or str(path) in str(err):
                raise
            raise _named(err, Path(path)) from err

    return read


def _naming_config(load_config: Callable[..., Any]) -> Callable[..., Any]:
    """spacy.util.load_config, an error of a config file that cannot be parsed (cut off, not UTF-8) naming
    the file: thinc said "Source contains parsing errors: '<string>'". An error the file alone does not
    give (an override of the caller's) passes through as it is."""

    @functools.wraps(load_config)
    def read(path: Union[str, Path], *args: Any, **kwargs: Any) -> Any:
        try:
            return load_config(path, *args, **kwargs)
        except DECODE_ERRORS as err:
            if getattr(err, _NAMED, False) or str(path) == "-" or str(path) in str(err):
                raise
            if args or kwargs.get("overrides") or kwargs.get("interpolate"):
                try:  # the file alone: its fault only if it fails without the caller's settings
                    load_config(path)
                except DECODE_ERRORS:
                    pass
                else:
                    raise
            raise _named(err, Path(path)) from err

    return read


def _naming_model_config(load_model_from_path: Callable[..., Any]) -> Callable[..., Any]:
    """spacy.util.load_model_from_path, the errors of a config.cfg that parses but is not a whole pipeline's
    (cut off at a line: no [nlp] section, E985; a component missing from [components], E956; a required
    setting missing, thinc's validation error) naming the file. With the caller's config overrides the
    error passes through as it is (it may be theirs)."""

    @functools.wraps(load_model_from_path)
    def load(model_path: Union[str, Path], *args: Any, **kwargs: Any) -> Any:
        try:
            return load_model_from_path(model_path, *args, **kwargs)
        except ValueError as err:
            config_path = Path(model_path) / "config.cfg"
            if getattr(err, _NAMED, False) or kwargs.get("config") or not config_path.is_file():
                raise
            if isinstance(err, ConfigValidationError):
                problems = "; ".join(
                    f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg')}"
                    for error in err.errors or ()
                )
            elif str(err).startswith(("[E985]", "[E956]")):
                problems = re.split(r"\.\s", str(err))[0]
            else:
                raise
            raise names_file(
                ValueError(
                    f"{config_path} is not a whole pipeline config ({problems}): the file is truncated, altered or "
                    "not the one saved with the pipeline. Restore the pipeline's files as they were saved."
                )
            ) from err

    return load


def names_file(err: Exception) -> Exception:
    """err, marked as naming its file already: the readers around pass it on as it is."""
    setattr(err, _NAMED, True)
    return err


# The errors a damaged file gives its reader (numpy's reshape, srsly's JSON and msgpack, zlib, a short read):
# others (an ImportError, MemoryError, a model hub's OSError) pass through as they are, not called a bad file.
DECODE_ERRORS = (ValueError, EOFError, KeyError, IndexError, TypeError, zlib.error, UnpackException)
# (thinc's ConfigValidationError, a config that cannot be parsed, is a ValueError.)


def _naming(reader: Callable[[Path], Any]) -> Callable[[Path], Any]:
    def read(path: Path) -> Any:
        try:
            return reader(path)
        except DECODE_ERRORS as err:
            if getattr(err, _NAMED, False) or str(path) in str(err):
                raise
            raise _named(err, path) from err

    return read


def _named(err: Exception, path: Path) -> Exception:
    """err again, its message naming path (a ValueError where err's type takes no message alone)."""
    what = "a file in the folder" if path.is_dir() else "the file"
    said = " ".join(str(err).split())  # one line (thinc's parse errors span several)
    message = (
        f"{path} cannot be read ({type(err).__name__}: {said}): {what} is truncated, altered or not the "
        "one saved with the pipeline. Restore the pipeline's files as they were saved."
    )
    try:
        named = type(err)(message)
    except Exception:  # a type with other arguments (UnicodeDecodeError's five, say)
        named = ValueError(message)
    if str(named) != message:  # KeyError's repr, or a type that keeps other text
        named = ValueError(message)
    return names_file(named)
