"""doccano's JSON lines: {"text", "label": [[start, end, type], ...]} or "entities": [{start_offset, ...}],
read and written."""

from typing import Any, Dict, Optional, Tuple

from .problems import Problems
from .record_fields import AnnotatedText, is_int_pair, read_spans, record_text


def is_doccano(record: Any) -> bool:
    """Whether a file's first JSON value is doccano's: an object with a "label" or "entities" list
    (and no "spans": Prodigy's)."""
    return (
        isinstance(record, dict)
        and "spans" not in record
        and (isinstance(record.get("label"), list) or isinstance(record.get("entities"), list))
    )


def read_doccano(record: dict, line: int, sentence: int, problems: Problems):
    """doccano: "label": [[start, end, type], ...] or "entities": [{start_offset, ...}]."""
    text = record_text(record, line, sentence, problems)
    if text is None:
        return None
    if "entities" in record and not isinstance(record.get("label"), list):
        raw = [
            [ent.get("start_offset"), ent.get("end_offset"), ent.get("label")] if isinstance(ent, dict) else ent
            for ent in record["entities"] or []
        ]
    else:
        raw = record.get("label")
    if raw is None:
        return text, None

    def read(item) -> Optional[Tuple[str, int, int, Optional[str]]]:
        if isinstance(item, list) and len(item) == 3 and is_int_pair(item[:2]) and isinstance(item[2], str):
            return item[2], item[0], item[1], None
        return None

    return text, read_spans(raw, read, "[start, end, label] with integer offsets", line, sentence, problems)


def write_doccano(item: AnnotatedText) -> Dict[str, Any]:
    """A doccano record: its "id" when it has one (doccano matches a record to its own by id), the
    text, "label" ([[start, end, label], ...]) when annotated and `select`'s information as "select"."""
    record: Dict[str, Any] = {"id": item.record_id} if item.record_id is not None else {}
    record["text"] = item.text
    if item.entities is not None:
        record["label"] = [[start, end, label] for start, end, label, *_ in item.entities]
    if item.meta is not None:
        record["select"] = item.meta
    return record
