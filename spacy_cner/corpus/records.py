"""The annotation tools' JSON (CLUENER, doccano, Prodigy, Label Studio): a text and its entities as
character offsets, read strictly (offsets checked against the text, UTF-16 offsets converted, overlaps
resolved only when repairing)."""
import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union


from ..tags import Entity
from .chars import clean_tag, reader_problems
from .problems import Problems, preview, read_lines


# (label, start, end exclusive, surface or None, description for messages)
_CandidateSpan = Tuple[str, int, int, Optional[str], str]
OFFSET_FORMATS = ("cluener", "doccano", "prodigy", "labelstudio")


_SURROGATE = re.compile("[\ud800-\udfff]")


def read_offset_records(
    path: Union[str, Path],
    format: str = "cluener",
    repair: bool = False,
    problems: Optional[Problems] = None,
) -> Iterator[Tuple[List[str], Optional[List[Entity]], Any]]:
    """Stream the records of an annotation-tool file as characters and checked entity spans.

    path (Union[str, Path]): The input file.
    format (str): "cluener" (JSON lines `{"text", "label": {type: {surface: [[s, e], ...]}}}`,
        `e` inclusive), "doccano" (JSON lines `{"text", "label": [[s, e, type], ...]}` or
        `"entities": [{"start_offset", "end_offset", "label"}]`), "prodigy" (JSON lines
        `{"text", "spans": [{"start", "end", "label"}], "answer"}`) or "labelstudio" (a JSON
        export: `[{"data": {"text"}, "annotations": [{"result": [{"value": {"start", "end",
        "labels"}}]}]}]`). Offsets are characters, the end exclusive unless said otherwise.
    repair (bool): Drop bad records and spans and report them instead of raising (ignored if
        `problems` is given).
    YIELDS (Tuple[List[str], Optional[List[Entity]], Any]): The characters, the spans (exclusive
        end, sorted) or None when the record carries no annotation (e.g. a test set), and the
        record's "id" (a string or integer; None without one), which doccano needs to match an
        exported record to its own.
    """
    path = Path(path)
    problems = reader_problems("read_offset_records", path, format, OFFSET_FORMATS, repair, problems,
                                "Use read_sentences for one-token-per-line files.")
    index = 0
    read_record = _RECORD_READERS[format]
    records = (
        _iter_json_array(path, problems)
        if format == "labelstudio"
        else _iter_json_lines(path, problems, lambda: index)
    )
    for line_no, record in records:
        parsed = read_record(record, line_no, index, problems)
        if parsed is None:
            continue
        text, candidates = parsed
        text = _replace_surrogates(text, line_no, index, problems)
        spans = None
        if candidates is not None:
            checked = [_check_span(text, *span, line_no, index, problems) for span in candidates]
            spans = _resolve_overlaps(
                text, [span for span in checked if span is not None], line_no, index, problems
            )
        record_id = record.get("id") if isinstance(record, dict) else None
        yield list(text), spans, record_id if isinstance(record_id, (str, int)) and not isinstance(record_id, bool) else None
        index += 1


def _iter_json_lines(
    path: Path, problems: Problems, sentence: Callable[[], int]
) -> Iterator[Tuple[int, dict]]:
    """Yield (line, record) for each JSON object line; bad lines are problems."""
    for line_no, text in read_lines(path, problems=problems, sentence=sentence):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            problems(
                "invalid_json", line_no, sentence(),
                f"invalid JSON ({err.msg} at column {err.colno}): expected one JSON object per "
                f"line, got {preview(text)}",
                "drop this line",
            )
            continue
        if not isinstance(record, dict):
            problems(
                "invalid_record", line_no, sentence(),
                f"expected a JSON object, got {type(record).__name__} {preview(text)}",
                "drop this line",
            )
            continue
        yield line_no, record


def _iter_json_array(path: Path, problems: Problems) -> Iterator[Tuple[int, dict]]:
    """Yield (line where the task starts, task) for each object of a JSON array file.

    json.load would give the tasks but not their lines; raw_decode element by element keeps
    each task's position for error messages.
    """
    raw = path.read_bytes()
    try:
        text = raw.decode("utf8").lstrip("\ufeff")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        problems(
            "bad_utf8", line, 0,
            f"invalid UTF-8 ({err.reason}): expected UTF-8 text, got "
            f"{raw[max(0, err.start - 6):err.end + 6]!r}; re-encode the file",
            "replace the bad bytes with U+FFFD",
        )
        text = raw.decode("utf8", errors="replace").lstrip("\ufeff")
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        raise ValueError(
            f"{path}:1: expected a Label Studio JSON export (a JSON array of tasks), got "
            f"{preview(text[pos:pos + 40])}. Export the project as JSON from Label Studio."
        )
    pos = _skip_space(text, pos + 1)
    line, counted = 1, 0
    while pos < len(text) and text[pos] != "]":
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            task, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path}:{err.lineno}: invalid JSON ({err.msg} at column {err.colno}): expected "
                f"a JSON array of tasks. Fix the file or export it again."
            ) from None
        if isinstance(task, dict):
            yield line, task
        else:
            problems(
                "invalid_record", line, 0,
                f"expected a task object, got {type(task).__name__}", "drop this task",
            )
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)


def _skip_space(text: str, pos: int) -> int:
    """The first position at or after pos that is not JSON whitespace."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _record_text(record: dict, line: int, sentence: int, problems: Problems) -> Optional[str]:
    """The non-empty "text" of a record, or None (a problem) when it has none."""
    text = record.get("text")
    if not isinstance(text, str):
        problems(
            "invalid_record", line, sentence,
            f'record has no "text" string: expected {{"text": str, ...}}, got '
            f"text={preview(repr(text))}",
            "drop this record",
        )
        return None
    if not text:
        problems(
            "empty_text", line, sentence,
            'empty "text": expected at least one character, got ""',
            "drop this record",
        )
        return None
    return text


def _read_cluener(record: dict, line: int, sentence: int, problems: Problems):
    """CLUENER: "label" maps each type to {surface: [[start, end_inclusive], ...]}."""
    text = _record_text(record, line, sentence, problems)
    if text is None:
        return None
    label = record.get("label")
    if label is None:
        return text, None
    if not isinstance(label, dict):
        problems(
            "invalid_record", line, sentence,
            f'"label" is not an object: expected {{type: {{surface: [[start, end], ...]}}}}, '
            f"got {preview(json.dumps(label, ensure_ascii=False))}",
            "drop the label and keep the sentence unannotated",
        )
        return text, None
    candidates: List[_CandidateSpan] = []
    for ent_type, surfaces in label.items():
        if not isinstance(surfaces, dict):
            problems(
                "invalid_record", line, sentence,
                f"label {ent_type!r}: expected {{surface: [[start, end], ...]}}, got "
                f"{preview(json.dumps(surfaces, ensure_ascii=False))}",
                f"drop the {ent_type} entities of this line",
            )
            continue
        for surface, offsets in surfaces.items():
            for offset in offsets if isinstance(offsets, list) else [offsets]:
                where = f"{ent_type} {surface!r} at {json.dumps(offset)}"
                if not _is_int_pair(offset):
                    _invalid_span(problems, line, sentence, where, f"[start, end] with integer offsets, got {json.dumps(offset)}")
                    continue
                start, end = offset
                candidates.append((ent_type, start, end + 1, surface, where + " (end inclusive)"))
    return text, candidates


def _read_doccano(record: dict, line: int, sentence: int, problems: Problems):
    """doccano: "label": [[start, end, type], ...] or "entities": [{start_offset, ...}]."""
    text = _record_text(record, line, sentence, problems)
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
        if isinstance(item, list) and len(item) == 3 and _is_int_pair(item[:2]) and isinstance(item[2], str):
            return item[2], item[0], item[1], None
        return None

    return text, _read_spans(raw, read, "[start, end, label] with integer offsets", line, sentence, problems)


def _read_prodigy(record: dict, line: int, sentence: int, problems: Problems):
    """Prodigy: "spans": [{"start", "end", "label"}]; rejected or ignored answers skipped."""
    text = _record_text(record, line, sentence, problems)
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
        if isinstance(item, dict) and _is_int_pair([item.get("start"), item.get("end")]) and isinstance(item.get("label"), str):
            return item["label"], item["start"], item["end"], item.get("text")
        return None

    return text, _read_spans(spans, read, '{"start": int, "end": int, "label": str}', line, sentence, problems)


def _read_labelstudio(task: dict, line: int, sentence: int, problems: Problems):
    """Label Studio: the task's first annotation that was not cancelled (a NER labels result)."""
    data = task.get("data")
    text = None
    if isinstance(data, dict):
        strings = [value for value in data.values() if isinstance(value, str)]
        text = data.get("text", strings[0] if len(strings) == 1 else None)
    text = _record_text({"text": text}, line, sentence, problems)
    if text is None:
        return None
    annotations = [
        annotation for annotation in task.get("annotations") or []
        if isinstance(annotation, dict) and not annotation.get("was_cancelled")
    ]
    if not annotations:
        return text, None
    if len(annotations) > 1:
        problems.note(
            "labelstudio_annotations", line, sentence,
            f"task {task.get('id')} has {len(annotations)} annotations: read the first",
        )
    candidates: List[_CandidateSpan] = []
    for result in annotations[0].get("result") or []:
        value = result.get("value") if isinstance(result, dict) else None
        if not isinstance(value, dict) or "labels" not in value:
            continue  # relations, choices, text areas: not entity spans
        labels = value.get("labels")
        where = f"task {task.get('id')} result {json.dumps(value, ensure_ascii=False)}"
        if not (_is_int_pair([value.get("start"), value.get("end")]) and isinstance(labels, list)
                and len(labels) == 1 and isinstance(labels[0], str)):
            _invalid_span(problems, line, sentence, where, '{"start": int, "end": int, "labels": [one label]}')
            continue
        start, end = _utf16_to_chars(text, value["start"], value["end"], value.get("text"))
        candidates.append((labels[0], start, end, value.get("text"), where))
    return text, candidates


def _read_spans(
    items: Any,
    read: Callable[[Any], Optional[Tuple[str, int, int, Optional[str]]]],
    expected: str,
    line: int,
    sentence: int,
    problems: Problems,
) -> List[_CandidateSpan]:
    """The candidate spans of a record's span items (one item or a list): read(item) gives
    (label, start, end, surface text or None), or None for an item not of the expected form,
    which is reported (or dropped)."""
    candidates: List[_CandidateSpan] = []
    for item in items if isinstance(items, list) else [items]:
        where = f"span {json.dumps(item, ensure_ascii=False)}"
        span = read(item)
        if span is None:
            _invalid_span(problems, line, sentence, where, expected)
            continue
        candidates.append((*span, where))
    return candidates


def _invalid_span(problems: Problems, line: int, sentence: int, where: str, expected: str) -> None:
    """Report (or repair, dropping it) a span a record reader cannot read."""
    problems("invalid_span", line, sentence, f"{where}: expected {expected}", "drop this span")


_RECORD_READERS = {
    "cluener": _read_cluener,
    "doccano": _read_doccano,
    "prodigy": _read_prodigy,
    "labelstudio": _read_labelstudio,
}


def _is_int_pair(values) -> bool:
    """Whether values is a list of two ints (bools excluded)."""
    return (
        isinstance(values, list)
        and len(values) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in values)
    )


def _utf16_to_chars(text: str, start: int, end: int, surface: Optional[str]) -> Tuple[int, int]:
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
    if surface is None or text[converted[0]:converted[1]] == surface:
        return converted
    return start, end


def _replace_surrogates(text: str, line: int, sentence: int, problems: Problems) -> str:
    """The text with lone surrogates (JSON "\\udcff") replaced by U+FFFD, as a problem."""
    if not _SURROGATE.search(text):
        return text
    found = sorted(set(_SURROGATE.findall(text)))
    problems(
        "lone_surrogate", line, sentence,
        f"text {preview(text)} holds lone surrogates {''.join(found)!r}, which are not "
        f"characters and cannot be written as UTF-8: expected valid Unicode text",
        "replace each with U+FFFD (one character for one, so offsets stay right)",
    )
    return _SURROGATE.sub("\ufffd", text)


def _check_span(
    text: str, ent_type: str, start: int, end: int, surface: Optional[str], where: str,
    line: int, sentence: int, problems: Problems,
) -> Optional[Entity]:
    """Check one span (exclusive end) against the text; None if it was dropped."""
    if not 0 <= start < end <= len(text):
        problems(
            "span_out_of_range", line, sentence,
            f"{where}: expected 0 <= start < end <= {len(text)} (text length, end exclusive), "
            f"got start={start}, end={end}",
            "drop this span",
        )
        return None
    if surface is not None and text[start:end] != _SURROGATE.sub("\ufffd", surface):
        problems(
            "surface_mismatch", line, sentence,
            f"{where}: expected text[{start}:{end}] == {surface!r}, got {text[start:end]!r}",
            "drop this span",
        )
        return None
    cleaned = clean_tag(ent_type, line, sentence, problems, what="label")
    if cleaned == "O" or not cleaned:
        problems(
            "invalid_span", line, sentence, f"{where}: expected a label, got {ent_type!r}",
            "drop this span",
        )
        return None
    return start, end, cleaned


def _resolve_overlaps(
    text: str, spans: List[Entity], line: int, sentence: int, problems: Problems
) -> List[Entity]:
    """Keep non-overlapping spans, longer first; each dropped span is a problem."""
    kept: List[Entity] = []
    taken: Dict[int, Entity] = {}
    for span in sorted(spans, key=lambda s: (-(s[1] - s[0]), s[0], s[2])):
        start, end, ent_type = span
        clash = next((taken[i] for i in range(start, end) if i in taken), None)
        if clash is None:
            kept.append(span)
            taken.update((i, span) for i in range(start, end))
            continue
        problems(
            "overlap", line, sentence,
            f"{ent_type} {text[start:end]!r} at [{start}, {end - 1}] overlaps {clash[2]} "
            f"{text[clash[0]:clash[1]]!r} at [{clash[0]}, {clash[1] - 1}]: expected "
            f"non-overlapping spans (a token has one entity)",
            f"keep the longer {clash[2]} span and drop this {ent_type} span",
        )
    return sorted(kept)
