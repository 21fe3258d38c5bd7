"""Prodigy's JSON lines: {"text", "spans": [{"start", "end", "label"}], "answer"}."""
from typing import Optional, Tuple

from .problems import Problems
from .record_fields import is_int_pair, read_spans, record_text


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
        if isinstance(item, dict) and is_int_pair([item.get("start"), item.get("end")]) and isinstance(item.get("label"), str):
            return item["label"], item["start"], item["end"], item.get("text")
        return None

    return text, read_spans(spans, read, '{"start": int, "end": int, "label": str}', line, sentence, problems)
