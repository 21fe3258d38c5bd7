"""CLUENER's JSON lines: {"text", "label": {type: {surface: [[start, end_inclusive], ...]}}}, read and
written."""

import json
from typing import Any, Dict, List

from .problems import Problems, preview
from .record_fields import AnnotatedText, CandidateSpan, invalid_span, is_int_pair, record_text


def is_cluener(record: Any) -> bool:
    """Whether a file's first JSON value is CLUENER's: an object with no "spans" (Prodigy's) and no
    "label" or "entities" list (doccano's); a record with a text alone is read as CLUENER's."""
    return (
        isinstance(record, dict)
        and "spans" not in record
        and not isinstance(record.get("label"), list)
        and not isinstance(record.get("entities"), list)
    )


def read_cluener(record: dict, line: int, sentence: int, problems: Problems):
    """CLUENER: "label" maps each type to {surface: [[start, end_inclusive], ...]}."""
    text = record_text(record, line, sentence, problems)
    if text is None:
        return None
    label = record.get("label")
    if label is None:
        return text, None
    if not isinstance(label, dict):
        problems(
            "invalid_record",
            line,
            sentence,
            f'"label" is not an object: expected {{type: {{surface: [[start, end], ...]}}}}, '
            f"got {preview(json.dumps(label, ensure_ascii=False))}",
            "drop the label and keep the sentence unannotated",
        )
        return text, None
    candidates: List[CandidateSpan] = []
    for ent_type, surfaces in label.items():
        if not isinstance(surfaces, dict):
            problems(
                "invalid_record",
                line,
                sentence,
                f"label {ent_type!r}: expected {{surface: [[start, end], ...]}}, got "
                f"{preview(json.dumps(surfaces, ensure_ascii=False))}",
                f"drop the {ent_type} entities of this line",
            )
            continue
        for surface, offsets in surfaces.items():
            for offset in offsets if isinstance(offsets, list) else [offsets]:
                where = f"{ent_type} {surface!r} at {json.dumps(offset)}"
                if not is_int_pair(offset):
                    invalid_span(
                        problems, line, sentence, where, f"[start, end] with integer offsets, got {json.dumps(offset)}"
                    )
                    continue
                start, end = offset
                candidates.append((ent_type, start, end + 1, surface, where + " (end inclusive)"))
    return text, candidates


def write_cluener(item: AnnotatedText) -> Dict[str, Any]:
    """A CLUENER record: the text and, when annotated, {type: {surface: [[start, end_inclusive]]}}."""
    record: Dict[str, Any] = {"text": item.text}
    if item.entities is not None:
        label: Dict[str, Dict[str, List[List[int]]]] = {}
        for start, end, ent_label, *_ in item.entities:
            surfaces = label.setdefault(ent_label, {})
            surfaces.setdefault(item.text[start:end], []).append([start, end - 1])
        record["label"] = label
    return record
