"""From rows to output records: nlp.pipe over the rows in order (bad rows passing through), a doc's
entities and scores as a record, a bad row's record naming its file and line, and the JSON forms of
the values a Parquet input holds that JSON does not."""

import base64
import datetime
import decimal
import math
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from .uncertainty import scoring_pipe
from .inputs import Row


def pipe_rows(
    nlp: Language, items: Iterable[Tuple[Row, Any]], **pipe_kwargs: Any
) -> Iterator[Tuple[Row, Any, Optional[Doc]]]:
    """nlp.pipe over (row, context) pairs in order; bad and too long rows pass through with doc None."""
    max_length = nlp.max_length

    def texts() -> Iterator[Tuple[str, Tuple[Row, Any]]]:
        for row, context in items:
            if row.error is None and len(row.text) > max_length:
                row.error = f"a text of {len(row.text)} characters is longer than nlp.max_length ({max_length})"
            # A bad row still goes through (as "") so that nlp.pipe keeps every row in order.
            yield (row.text if row.error is None else ""), (row, context)

    for doc, (row, context) in nlp.pipe(texts(), as_tuples=True, **pipe_kwargs):
        yield row, context, (doc if row.error is None else None)


def scores_key(nlp: Language) -> Optional[str]:
    """The doc.spans key where the pipeline's crf_ner writes entity probabilities, if any."""
    for _, pipe in nlp.pipeline:
        key = getattr(pipe, "spans_key", None)
        if isinstance(key, str):
            return key
    return None


def set_uncertainty(nlp: Language, strategy: Optional[str], seed: int = 0) -> None:
    """Have the pipeline's crf_ner score every doc with an active-learning strategy (doc._.uncertainty);
    nothing when strategy is None."""
    if strategy is None:
        return
    pipe = nlp.get_pipe(scoring_pipe(nlp))
    pipe.uncertainty = strategy
    pipe.uncertainty_seed = seed


def doc_record(
    doc: Doc, row: Row, entities_field: str, spans_key: Optional[str], alternatives: bool = False
) -> Dict[str, Any]:
    """The output record of one doc: the row's fields plus its entities (start, end, label, text, score).
    An entity's score is ent._.score, its probability (crf_ner's, or the ready LAC pipeline's); the
    field is there when the pipeline computes probabilities. Where crf_ner scored the doc for active
    learning (doc._.uncertainty, `select`), the field holds {"entities": [...], "uncertainty": score}: the
    field is known to be free in the row. alternatives: also an "alternatives" field, the other scored
    spans of doc.spans[spans_key] (span_alternatives)."""
    group = doc.spans.get(spans_key) if spans_key is not None else None
    # ent._.score is registered (extensions.py) by the pipes that set it: a pipeline without one has none.
    scores = [ent._.score if Span.has_extension("score") else None for ent in doc.ents]
    scored = group is not None or any(score is not None for score in scores)
    entities = []
    for ent, score in zip(doc.ents, scores):
        entity = {"start": ent.start_char, "end": ent.end_char, "label": ent.label_, "text": ent.text}
        if scored:
            entity["score"] = None if score is None else float(score)
        entities.append(entity)
    uncertainty = doc._.uncertainty
    value = entities if uncertainty is None else {"entities": entities, "uncertainty": float(uncertainty)}
    record = {**row.fields, entities_field: value}
    if alternatives:
        record["alternatives"] = span_alternatives(doc, spans_key)
    return record


def span_alternatives(doc: Doc, spans_key: Optional[str]) -> List[Dict[str, Any]]:
    """The spans crf_ner scored beside doc.ents (doc.spans[spans_key]: other labels and boundaries, at or
    above its candidate_threshold), as entity records with their probability, in the group's order; []
    where the doc has no such group."""
    group = doc.spans.get(spans_key) if spans_key is not None else None
    if group is None or "scores" not in group.attrs:
        return []
    entities = {(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents}
    return [
        {"start": span.start_char, "end": span.end_char, "label": span.label_, "text": span.text, "score": float(p)}
        for span, p in zip(group, group.attrs["scores"])
        if (span.start_char, span.end_char, span.label_) not in entities
    ]


def error_record(row: Row, where: str) -> Dict[str, Any]:
    """The output record of a bad row: its fields as read plus an error naming its file and line."""
    return {**row.fields, "error": f"{where}: {row.error}"}


def json_ready(value: Any) -> Any:
    """value with what JSON cannot hold (Parquet's timestamp, date, time, duration, decimal and binary
    columns, as pyarrow reads them) in JSON forms: datetimes, dates and times as ISO 8601 strings (an
    offset where they have a time zone), durations as seconds, decimals as their exact str, bytes as
    base64 text; NaN and infinities (which json writes as NaN and Infinity, not JSON) as None (null).
    Raises TypeError for a value of another kind.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, (datetime.date, datetime.time)):  # datetime.datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a {type(value).__name__} value, which JSON cannot hold")
