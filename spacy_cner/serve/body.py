"""A POST /v1/entities body read and checked: every way it can be wrong is a BadRequest with a 4xx status
and one line saying what is wrong and where (the text's index), never a 500.

The body is a JSON object: {"text": "..."} for one text or {"texts": ["...", ...]} for several, and
optionally "alternatives": true (the other scored spans of each text too).
"""

import json
from typing import Any, List, NamedTuple

FIELDS = ("text", "texts", "alternatives")


class BadRequest(Exception):
    """A request the server cannot answer: its HTTP status and the one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())  # one line, whatever the parser's message held


class EntitiesRequest(NamedTuple):
    """What a body asks for."""

    texts: List[str]
    single: bool  # {"text": ...}: the answer is the row itself, not {"results": [row]}
    alternatives: bool


def parse_body(body: bytes, max_chars: int, max_texts: int) -> EntitiesRequest:
    """The texts a body asks to annotate, or BadRequest saying what is wrong with it.

    body (bytes): The request body as received.
    max_chars (int): The longest text allowed (413 above it).
    max_texts (int): The most texts allowed (413 above it).
    RETURNS (EntitiesRequest): The texts, whether one was sent alone, whether alternatives are asked for.
    """
    if not body:
        raise BadRequest(400, 'The body is empty: send a JSON object, {"text": "..."} or {"texts": [...]}.')
    try:
        decoded = body.decode("utf8")
    except UnicodeDecodeError as err:
        raise BadRequest(400, f"The body is not UTF-8: byte {err.start} ({body[err.start : err.start + 1]!r}).")
    try:
        value = json.loads(decoded)
    except json.JSONDecodeError as err:
        raise BadRequest(400, f"The body is not JSON: {err.msg} at line {err.lineno} column {err.colno}.")
    except RecursionError:
        raise BadRequest(400, "The body is JSON nested too deeply to read.")
    if not isinstance(value, dict):
        raise BadRequest(
            422, f'The body is a JSON {_kind(value)}: send an object, {{"text": "..."}} or {{"texts": [...]}}.'
        )
    unknown = [key for key in value if key not in FIELDS]
    if unknown:
        raise BadRequest(422, f"Unknown field {unknown[0]!r}: the body's fields are {', '.join(FIELDS)}.")
    if ("text" in value) == ("texts" in value):
        raise BadRequest(
            422,
            'Give "text" (one text) or "texts" (a list of texts), not both.'
            if "text" in value
            else 'No "text" or "texts" field: send {"text": "..."} or {"texts": ["...", ...]}.',
        )
    alternatives = value.get("alternatives", False)
    if not isinstance(alternatives, bool):
        raise BadRequest(422, f'"alternatives" is a {_kind(alternatives)}: expected true or false.')
    single = "text" in value
    if single:
        texts = [value["text"]]
    else:
        texts = value["texts"]
        if not isinstance(texts, list):
            raise BadRequest(422, f'"texts" is a {_kind(texts)}: expected a list of strings.')
        if not texts:
            raise BadRequest(422, '"texts" is an empty list: send at least one text.')
        if len(texts) > max_texts:
            raise BadRequest(
                413, f'"texts" holds {len(texts)} texts, more than the limit of {max_texts} (--max-texts).'
            )
    for index, text in enumerate(texts):
        where = '"text"' if single else f'"texts"[{index}]'
        if not isinstance(text, str):
            raise BadRequest(422, f"{where} is a {_kind(text)}: expected a string.")
        if not text:
            raise BadRequest(422, f"{where} is empty: send text to annotate.")
        if len(text) > max_chars:
            raise BadRequest(
                413, f"{where} has {len(text)} characters, more than the limit of {max_chars} (--max-chars)."
            )
        try:
            text.encode("utf8")
        except UnicodeEncodeError as err:
            raise BadRequest(
                422,
                f"{where} has a lone surrogate {text[err.start]!r} at character {err.start}: not valid Unicode "
                "text (fix the \\u escape, or replace it with U+FFFD).",
            )
    return EntitiesRequest(texts, single, alternatives)


def _kind(value: Any) -> str:
    """A JSON value's type as JSON names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"
