"""The annotation tools' JSON (CLUENER, doccano, Prodigy, Label Studio: one reader per file beside this
one, named in formats.py): a text and its entities as character offsets, read strictly here (offsets
checked against the text, lone surrogates replaced, overlaps resolved only when repairing)."""

import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..tags import Entity
from .chars import clean_tag, reader_problems
from .formats import FORMATS, OFFSET_FORMATS
from .json_files import iter_json_array, iter_json_lines
from .problems import Problems, preview

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
    problems = reader_problems(
        "read_offset_records",
        path,
        format,
        OFFSET_FORMATS,
        repair,
        problems,
        "Use read_sentences for one-token-per-line files.",
    )
    index = 0
    read_record = FORMATS[format].read
    records = (
        iter_json_array(path, problems) if FORMATS[format].array else iter_json_lines(path, problems, lambda: index)
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
            spans = _resolve_overlaps(text, [span for span in checked if span is not None], line_no, index, problems)
        record_id = record.get("id") if isinstance(record, dict) else None
        yield (
            list(text),
            spans,
            (record_id if isinstance(record_id, (str, int)) and not isinstance(record_id, bool) else None),
        )
        index += 1


def _replace_surrogates(text: str, line: int, sentence: int, problems: Problems) -> str:
    """The text with lone surrogates (JSON "\\udcff") replaced by U+FFFD, as a problem."""
    if not _SURROGATE.search(text):
        return text
    found = sorted(set(_SURROGATE.findall(text)))
    problems(
        "lone_surrogate",
        line,
        sentence,
        f"text {preview(text)} holds lone surrogates {''.join(found)!r}, which are not "
        f"characters and cannot be written as UTF-8: expected valid Unicode text",
        "replace each with U+FFFD (one character for one, so offsets stay right)",
    )
    return _SURROGATE.sub("\ufffd", text)


def _check_span(
    text: str,
    ent_type: str,
    start: int,
    end: int,
    surface: Optional[str],
    where: str,
    line: int,
    sentence: int,
    problems: Problems,
) -> Optional[Entity]:
    """Check one span (exclusive end) against the text; None if it was dropped."""
    if not 0 <= start < end <= len(text):
        problems(
            "span_out_of_range",
            line,
            sentence,
            f"{where}: expected 0 <= start < end <= {len(text)} (text length, end exclusive), "
            f"got start={start}, end={end}",
            "drop this span",
        )
        return None
    if surface is not None and text[start:end] != _SURROGATE.sub("\ufffd", surface):
        problems(
            "surface_mismatch",
            line,
            sentence,
            f"{where}: expected text[{start}:{end}] == {surface!r}, got {text[start:end]!r}",
            "drop this span",
        )
        return None
    cleaned = clean_tag(ent_type, line, sentence, problems, what="label")
    if cleaned == "O" or not cleaned:
        problems(
            "invalid_span",
            line,
            sentence,
            f"{where}: expected a label, got {ent_type!r}",
            "drop this span",
        )
        return None
    return start, end, cleaned


def _resolve_overlaps(text: str, spans: List[Entity], line: int, sentence: int, problems: Problems) -> List[Entity]:
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
            "overlap",
            line,
            sentence,
            f"{ent_type} {text[start:end]!r} at [{start}, {end - 1}] overlaps {clash[2]} "
            f"{text[clash[0] : clash[1]]!r} at [{clash[0]}, {clash[1] - 1}]: expected "
            f"non-overlapping spans (a token has one entity)",
            f"keep the longer {clash[2]} span and drop this {ent_type} span",
        )
    return sorted(kept)
