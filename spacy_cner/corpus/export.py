"""Writers that take a corpus of Docs back to the formats `convert` reads.

A corrected corpus can go back to the tool it came from: one token per line (`chars`), CLUENER,
doccano or Prodigy JSON lines, or a Label Studio JSON array, each written by its module's writer
(formats.py's table). `convert` reads each of them back into equal Docs (same text, tokens and
entities), which the round-trip tests check.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Union

from spacy.tokens import Doc

from ..tags import EXPORT_SCHEMES
from .formats import FORMATS, WRITE_FORMATS
from .json_files import write_json_records
from .record_fields import AnnotatedText

# The formats `export` writes (the CLI's choices).
EXPORT_FORMATS = WRITE_FORMATS


@dataclass
class ExportStats:
    """Counts from exporting one corpus."""

    n_docs: int = 0
    n_entities: int = 0
    n_unannotated: int = 0


def export_docs(
    docs: Iterable[Doc], path: Union[str, Path], format: str = "chars", scheme: str = "bioes"
) -> ExportStats:
    """Write Docs with their entities to a file `python -m spacy_cner convert` reads back.

    docs (Iterable[Doc]): The corpus; doc i is named "doc i" in errors.
    path (Union[str, Path]): The output file.
    format (str): One of EXPORT_FORMATS: "chars" (`token<TAB>tag` lines, a blank line after each
        doc), "cluener", "doccano" or "prodigy" (JSON lines, character offsets) or "labelstudio"
        (a JSON array of tasks, UTF-16 offsets).
    scheme (str): The tag scheme of "chars": "bioes", "bio" (IOB2) or "bmes".
    RETURNS (ExportStats): What was written.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format: expected one of {', '.join(EXPORT_FORMATS)}, got {format!r}.")
    if scheme not in EXPORT_SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(EXPORT_SCHEMES)}, got {scheme!r}.")
    path = Path(path)
    fmt = FORMATS[format]
    stats = ExportStats()
    # Written to a temporary name first: a doc that cannot be written leaves no partial file.
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf8", newline="\n") as file_:
        try:
            if fmt.tags:
                for i, doc in enumerate(_counted(docs, stats)):
                    text = fmt.write(doc, i, scheme)
                    if i == 0 and text.startswith("\ufeff"):
                        # Readers drop a byte-order mark that starts a file: one written before the
                        # doc's own U+FEFF is dropped instead, and the doc's is read back.
                        file_.write("\ufeff")
                    file_.write(text)
            else:
                records = (fmt.write(_annotated_text(doc)) for doc in _counted(docs, stats))
                write_json_records(records, file_, array=fmt.array)
        except ValueError:
            file_.close()
            partial.unlink()
            raise
    partial.replace(path)
    return stats


def _counted(docs: Iterable[Doc], stats: ExportStats) -> Iterator[Doc]:
    """The docs, each refused if empty, and counted into stats once written (when the next is asked)."""
    for index, doc in enumerate(docs):
        if not doc.text:
            raise ValueError(
                f"doc {index} is empty: expected at least one character (an empty doc cannot be "
                f"written in any of {', '.join(EXPORT_FORMATS)}). Remove it from the corpus."
            )
        yield doc
        stats.n_docs += 1
        if doc.has_annotation("ENT_IOB"):
            stats.n_entities += len(doc.ents)
        else:
            stats.n_unannotated += 1


def _annotated_text(doc: Doc) -> AnnotatedText:
    """A doc's text and entities (None without entity annotation), and the "id" of the record it
    was converted from (convert keeps it in doc.user_data), for the JSON writers."""
    entities = None
    if doc.has_annotation("ENT_IOB"):
        entities = [(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents]
    user_data: Dict[Any, Any] = doc.user_data
    return AnnotatedText(doc.text, entities, record_id=user_data.get("id"))
