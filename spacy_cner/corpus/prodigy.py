"""Prodigy's JSON lines: {"text", "spans": [{"start", "end", "label"}], "answer"}, read and written."""

from typing import Any, Dict, Optional, Tuple

from .problems import Problems
from .record_fields import AnnotatedText, is_int_pair, read_spans, record_text, span_dicts


def is_prodigy(record: Any) -> bool:
    """Whether a file's first JSON value is Prodigy's: an object with "spans"."""
    return isinstance(record, dict) and "spans" in record


def read_prodigy(record: dict, line: int, sentence: int, problems: Problems):
    """Prodigy: "spans": [{"start", "end", "label"}]; rejected or ignored answers skipped."""
    text = record_text(record, line, sentence, problems)
    if text is None:
        return None
    answer = record.get("answer", "accept")
    if answer != "accept":
        problems.note("prodigy_not_accepted", line, sentence, f'skipped: "answer" is {answer!r}')
        return None
    spans = record.get("spans")
    if spans is None:
        return text, None

    def read(item) -> Optional[Tuple[str, int, int, Optional[str]]]:
        if (
            isinstance(item, dict)
            and is_int_pair([item.get("start"), item.get("end")])
            and isinstance(item.get("label"), str)
        ):
            return item["label"], item["start"], item["end"], item.get("text")
        return None

    return text, read_spans(spans, read, '{"start": int, "end": int, "label": str}', line, sentence, problems)


def write_prodigy(item: AnnotatedText) -> Dict[str, Any]:
    """A Prodigy task: its "id" when it has one, the text, "spans" ({start, end, label, text, score})
    when annotated and `select`'s information as "meta" (which Prodigy shows beside the text)."""
    record: Dict[str, Any] = {"id": item.record_id} if item.record_id is not None else {}
    record["text"] = item.text
    if item.entities is not None:
        record["spans"] = span_dicts(item)
    if item.meta is not None:
        record["meta"] = item.meta
    return record
