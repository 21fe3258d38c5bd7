"""Writers that take a corpus of Docs back to the formats `convert` reads.

A corrected corpus can go back to the tool it came from: one token per line (`chars`),
CLUENER JSON lines, or doccano JSON lines. `convert` reads each of them back into equal Docs
(same text, tokens and entities), which the round-trip tests check.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Tuple, Union

from spacy.tokens import Doc

from ..tags import EXPORT_SCHEMES, spans_to_tags

EXPORT_FORMATS = ("chars", "cluener", "doccano")


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
    format (str): "chars" (`token<TAB>tag` lines, a blank line after each doc), "cluener" or
        "doccano" (JSON lines, character offsets).
    scheme (str): The tag scheme of "chars": "bioes", "bio" (IOB2) or "bmes".
    RETURNS (ExportStats): What was written.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(
            f"format: expected one of {', '.join(EXPORT_FORMATS)}, got {format!r}."
        )
    if scheme not in EXPORT_SCHEMES:
        raise ValueError(
            f"scheme: expected one of {', '.join(EXPORT_SCHEMES)}, got {scheme!r}."
        )
    path = Path(path)
    stats = ExportStats()
    # Written to a temporary name first: a doc that cannot be written leaves no partial file.
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf8", newline="\n") as file_:
        try:
            for i, doc in enumerate(docs):
                text = _write_doc(doc, i, format, scheme)
                if i == 0 and text.startswith("\ufeff"):
                    # Readers drop a byte-order mark that starts a file: one written before the
                    # doc's own U+FEFF is dropped instead, and the doc's is read back.
                    file_.write("\ufeff")
                file_.write(text)
                stats.n_docs += 1
                if doc.has_annotation("ENT_IOB"):
                    stats.n_entities += len(doc.ents)
                else:
                    stats.n_unannotated += 1
        except ValueError:
            file_.close()
            partial.unlink()
            raise
    partial.replace(path)
    return stats


def _write_doc(doc: Doc, index: int, format: str, scheme: str) -> str:
    """One doc in the output format, with its line ending(s)."""
    if not doc.text:
        raise ValueError(
            f"doc {index} is empty: expected at least one character (an empty doc cannot be "
            f"written in any of {', '.join(EXPORT_FORMATS)}). Remove it from the corpus."
        )
    annotated = doc.has_annotation("ENT_IOB")
    ents = [(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents]
    if format == "cluener":
        record = {"text": doc.text}
        if annotated:
            label: dict = {}
            for start, end, ent_label in ents:
                surfaces = label.setdefault(ent_label, {})
                surfaces.setdefault(doc.text[start:end], []).append([start, end - 1])
            record["label"] = label
        return json.dumps(record, ensure_ascii=False) + "\n"
    if format == "doccano":
        # doccano matches a record to its own by id: one read by convert comes back.
        record = {"id": doc.user_data["id"]} if "id" in doc.user_data else {}
        record["text"] = doc.text
        if annotated:
            record["label"] = [[start, end, ent_label] for start, end, ent_label in ents]
        return json.dumps(record, ensure_ascii=False) + "\n"
    if not annotated:
        raise ValueError(
            f"doc {index} has no entity annotation (ENT_IOB unset): a `token tag` file cannot "
            f"say 'missing'. Export as cluener or doccano, which leave its label out."
        )
    units = _units(doc)
    for text, _, _ in units:
        if "\n" in text or "\r" in text:
            raise ValueError(
                f"doc {index}: the token {text!r} holds a line break, which a one-token-per-line "
                f"file cannot hold. Export as cluener or doccano."
            )
    starts = {start: i for i, (_, start, _) in enumerate(units)}
    ends = {end: i + 1 for i, (_, _, end) in enumerate(units)}
    spans = [(starts[start], ends[end], ent_label) for start, end, ent_label in ents]
    tags = spans_to_tags(spans, len(units), "BIO" if scheme == "bio" else "BIOES")
    if scheme == "bmes":
        tags = ["M" + tag[1:] if tag.startswith("I-") else tag for tag in tags]
    return "".join(f"{text}\t{tag}\n" for (text, _, _), tag in zip(units, tags)) + "\n"


def _units(doc: Doc) -> List[Tuple[str, int, int]]:
    """(text, start_char, end_char) of each token and of each token's trailing whitespace.

    Whitespace after a token (a word-segmented doc's spaces) becomes a line of its own, so the
    text survives the round trip; converted character docs have none.
    """
    units: List[Tuple[str, int, int]] = []
    for token in doc:
        units.append((token.text, token.idx, token.idx + len(token.text)))
        if token.whitespace_:
            end = token.idx + len(token.text)
            units.append((token.whitespace_, end, end + len(token.whitespace_)))
    return units
