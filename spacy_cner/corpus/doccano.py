"""doccano's JSON lines: {"text", "label": [[start, end, type], ...]} or "entities": [{start_offset, ...}]."""
from typing import Optional, Tuple

from .problems import Problems
from .record_fields import is_int_pair, read_spans, record_text


def read_doccano(record: dict, line: int, sentence: int, problems: Problems):
    """doccano: "label": [[start, end, type], ...] or "entities": [{start_offset, ...}]."""
    text = record_text(record, line, sentence, problems)
    if text is None:
        return None
    if "entities" in record and not isinstance(record.get("label"), list):
        raw = [
            [ent.get("start_offset"), ent.get("end_offset"), ent.get("label")]
            if isinstance(ent, dict) else ent
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
