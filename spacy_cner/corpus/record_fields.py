"""What the annotation tools' records share: a text, and span items read into candidate spans
(label, start, end, surface, where) that records.py checks against the text; and, the other way,
the annotated text (AnnotatedText) that each tool's writer turns into one of its records."""

import dataclasses
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .problems import Problems, preview


# (label, start, end exclusive, surface or None, description for messages)
CandidateSpan = Tuple[str, int, int, Optional[str], str]
# (start, end exclusive, label) of a gold entity, or (start, end, label, probability) of a model's
# entity: a writer writes the probability where the entity carries one (None included).
WrittenEntity = Tuple[Any, ...]


@dataclasses.dataclass
class AnnotatedText:
    """One text and its entities (character offsets), as every tool's writer takes it.

    text (str): The text.
    entities (Optional[Sequence[WrittenEntity]]): Its entities; None: not annotated (the record
        then carries no annotation, which the readers read back as None).
    record_id (Any): The record's "id" as read (doccano matches an exported record to its own).
    fields (Dict[str, Any]): Other fields of the input row, carried where the tool keeps them.
    meta (Optional[Dict[str, Any]]): `select`'s information on the text (score, strategy, source).
    model (Optional[str]): Set when the entities are a model's guesses (pre-annotations, Label
        Studio's "predictions"), not annotations.
    """

    text: str
    entities: Optional[Sequence[WrittenEntity]]
    record_id: Any = None
    fields: Dict[str, Any] = dataclasses.field(default_factory=dict)
    meta: Optional[Dict[str, Any]] = None
    model: Optional[str] = None


def span_dicts(item: AnnotatedText) -> List[Dict[str, Any]]:
    """The entities as Prodigy's spans ({start, end, label, text}, and score where they carry one)."""
    spans = []
    for start, end, label, *score in item.entities or ():
        span = {"start": start, "end": end, "label": label, "text": item.text[start:end]}
        if score:
            span["score"] = score[0]
        spans.append(span)
    return spans


def record_text(record: dict, line: int, sentence: int, problems: Problems) -> Optional[str]:
    """The non-empty "text" of a record, or None (a problem) when it has none."""
    text = record.get("text")
    if not isinstance(text, str):
        problems(
            "invalid_record",
            line,
            sentence,
            f'record has no "text" string: expected {{"text": str, ...}}, got text={preview(repr(text))}',
            "drop this record",
        )
        return None
    if not text:
        problems(
            "empty_text",
            line,
            sentence,
            'empty "text": expected at least one character, got ""',
            "drop this record",
        )
        return None
    return text


def read_spans(
    items: Any,
    read: Callable[[Any], Optional[Tuple[str, int, int, Optional[str]]]],
    expected: str,
    line: int,
    sentence: int,
    problems: Problems,
) -> List[CandidateSpan]:
    """The candidate spans of a record's span items (one item or a list): read(item) gives
    (label, start, end, surface text or None), or None for an item not of the expected form,
    which is reported (or dropped)."""
    candidates: List[CandidateSpan] = []
    for item in items if isinstance(items, list) else [items]:
        where = f"span {json.dumps(item, ensure_ascii=False)}"
        span = read(item)
        if span is None:
            invalid_span(problems, line, sentence, where, expected)
            continue
        candidates.append((*span, where))
    return candidates


def invalid_span(problems: Problems, line: int, sentence: int, where: str, expected: str) -> None:
    """Report (or repair, dropping it) a span a record reader cannot read."""
    problems("invalid_span", line, sentence, f"{where}: expected {expected}", "drop this span")


def is_int_pair(values) -> bool:
    """Whether values is a list of two ints (bools excluded)."""
    return (
        isinstance(values, list)
        and len(values) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in values)
    )
