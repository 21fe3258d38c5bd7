"""spaCy's load errors named by their file: spacy.util.from_disk's readers wrapped, once, when a
pipeline with a spacy-cner component is loaded (importing spacy_cner installs it).

Why a patch and not a wrapper of our own: the files are read inside spaCy (Language.from_disk reads
the vocab, the tokenizer and each component; Vocab and Vectors read their own files), every one of
them through spacy.util.from_disk, looked up as a module attribute at each call. A truncated
`vocab/vectors` raised numpy's "cannot reshape array of size 100 into shape (30,4)" and a damaged
`vocab/strings.json` srsly's "Expected object or value", naming no file. The wrapper changes nothing
but the message of an error (its type kept where the type can be made from a message): the
innermost reader's file is named, and what to do.
"""

import functools
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Union

import spacy.util
from srsly.msgpack.exceptions import UnpackException

# Set on an error whose message already names its file: an outer reader passes it on as it is.
_NAMED = "_spacy_cner_names_file"


def name_files_in_load_errors() -> None:
    """Wrap spacy.util.from_disk so that an error of one of its readers names the file it read."""
    if getattr(spacy.util.from_disk, _NAMED, False):
        return
    spacy_from_disk = spacy.util.from_disk

    @functools.wraps(spacy_from_disk)
    def from_disk(path: Union[str, Path], readers: Dict[str, Callable[[Path], Any]], exclude: Iterable[str]) -> Path:
        return spacy_from_disk(path, {key: _naming(reader) for key, reader in readers.items()}, exclude)

    setattr(from_disk, _NAMED, True)
    spacy.util.from_disk = from_disk


def names_file(err: Exception) -> Exception:
    """err, marked as naming its file already: the readers around pass it on as it is."""
    setattr(err, _NAMED, True)
    return err


# The errors a damaged file gives its reader (numpy's reshape, srsly's JSON and msgpack, zlib, a short read):
# others (an ImportError, MemoryError, a model hub's OSError) pass through as they are, not called a bad file.
DECODE_ERRORS = (ValueError, EOFError, KeyError, IndexError, TypeError, zlib.error, UnpackException)


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
    message = (
        f"{path} cannot be read ({type(err).__name__}: {err}): {what} is truncated, altered or not the "
        "one saved with the pipeline. Restore the pipeline's files as they were saved."
    )
    try:
        named = type(err)(message)
    except Exception:  # a type with other arguments (UnicodeDecodeError's five, say)
        named = ValueError(message)
    if str(named) != message:  # KeyError's repr, or a type that keeps other text
        named = ValueError(message)
    return names_file(named)
