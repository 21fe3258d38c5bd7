"""Label Studio's JSON export: [{"data": {"text"}, "annotations": [{"result": [{"value": {"start", "end",
"labels"}}]}]}], its offsets in UTF-16 units, read and written (a model's entities as "predictions")."""

import json
from typing import Any, Dict, List, Optional, Tuple

from .problems import Problems
from .record_fields import AnnotatedText, CandidateSpan, invalid_span, is_int_pair, record_text


def is_labelstudio(value: Any) -> bool:
    """Whether a file's JSON value is Label Studio's export: an array (of tasks)."""
    return isinstance(value, list)


def read_labelstudio(task: dict, line: int, sentence: int, problems: Problems):
    """Label Studio: the task's first annotation that was not cancelled (a NER labels result)."""
    data = task.get("data")
    text = None
    if isinstance(data, dict):
        strings = [value for value in data.values() if isinstance(value, str)]
        text = data.get("text", strings[0] if len(strings) == 1 else None)
    text = record_text({"text": text}, line, sentence, problems)
    if text is None:
        return None
    annotations = [
        annotation
        for annotation in task.get("annotations") or []
        if isinstance(annotation, dict) and not annotation.get("was_cancelled")
    ]
    if not annotations:
        return text, None
    if len(annotations) > 1:
        problems.note(
            "labelstudio_annotations",
            line,
            sentence,
            f"task {task.get('id')} has {len(annotations)} annotations: read the first",
        )
    candidates: List[CandidateSpan] = []
    for result in annotations[0].get("result") or []:
        value = result.get("value") if isinstance(result, dict) else None
        if not isinstance(value, dict) or "labels" not in value:
            continue  # relations, choices, text areas: not entity spans
        labels = value.get("labels")
        where = f"task {task.get('id')} result {json.dumps(value, ensure_ascii=False)}"
        if not (
            is_int_pair([value.get("start"), value.get("end")])
            and isinstance(labels, list)
            and len(labels) == 1
            and isinstance(labels[0], str)
        ):
            invalid_span(problems, line, sentence, where, '{"start": int, "end": int, "labels": [one label]}')
            continue
        start, end = utf16_to_chars(text, value["start"], value["end"], value.get("text"))
        candidates.append((labels[0], start, end, value.get("text"), where))
    return text, candidates


def write_labelstudio(item: AnnotatedText) -> Dict[str, Any]:
    """A Label Studio task: {"data": {"text", the row's other fields}, "meta"} and its entities as
    labels results (offsets in UTF-16 units), under "annotations", or under "predictions" (with the
    model's name and the text's score) when they are a model's guesses."""
    text = item.text
    results = []
    for k, (start, end, label, *score) in enumerate(item.entities or ()):
        start16, end16 = chars_to_utf16(text, start, end)
        value = {"start": start16, "end": end16, "text": text[start:end], "labels": [label]}
        result = {"id": f"e{k}", "from_name": "label", "to_name": "text", "type": "labels", "value": value}
        if score:
            result["score"] = score[0]
        results.append(result)
    task: Dict[str, Any] = {"id": item.record_id} if item.record_id is not None else {}
    task["data"] = {"text": text, **{key: value for key, value in item.fields.items() if key != "text"}}
    if item.meta is not None:
        task["meta"] = item.meta
    if item.model is not None:
        score = item.meta.get("score") if item.meta is not None else None
        task["predictions"] = [{"model_version": str(item.model), "score": score, "result": results}]
    elif item.entities is not None:
        task["annotations"] = [{"result": results}]
    return task


def chars_to_utf16(text: str, start: int, end: int) -> Tuple[int, int]:
    """Label Studio's offsets (UTF-16 units, as JavaScript counts) for code point offsets: each
    character beyond U+FFFF before an offset counts twice."""

    def units(index: int) -> int:
        return index + sum(1 for char in text[:index] if char > "\uffff")

    return units(start), units(end)


def utf16_to_chars(text: str, start: int, end: int, surface: Optional[str]) -> Tuple[int, int]:
    """Code point offsets for Label Studio offsets, which count UTF-16 units.

    Label Studio's front end measures offsets in JavaScript string units, so each character
    beyond U+FFFF counts twice. When a code point reading is the one that gives the surface
    text, it is kept (files written by other tools).
    """
    if not text or max(text) <= "\uffff":
        return start, end
    units = 0
    to_char: Dict[int, int] = {}
    for i, char in enumerate(text):
        to_char[units] = i
        units += 2 if char > "\uffff" else 1
    to_char[units] = len(text)
    if start not in to_char or end not in to_char:
        return start, end
    converted = to_char[start], to_char[end]
    if surface is None or text[converted[0] : converted[1]] == surface:
        return converted
    return start, end
