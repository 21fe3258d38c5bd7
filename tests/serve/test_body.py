"""Every bad /v1/entities body is a BadRequest with a 4xx and one line saying what is wrong, where."""

import json

import pytest

from spacy_cner.serve.body import BadRequest, parse_body

LIMITS = {"max_chars": 100, "max_texts": 3}


def test_one_text_or_a_list():
    one = parse_body('{"text": "张三"}'.encode("utf8"), **LIMITS)
    assert one.texts == ["张三"] and one.single and not one.alternatives
    many = parse_body(json.dumps({"texts": ["a", "北京"], "alternatives": True}).encode("utf8"), **LIMITS)
    assert many.texts == ["a", "北京"] and not many.single and many.alternatives


@pytest.mark.parametrize(
    "body,status,words",
    [
        (b"", 400, "body is empty"),
        (b'{"text": "\xe5\x8c"}', 400, "not UTF-8: byte 10"),
        (b'{"text": ', 400, "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
        (b'["a"]', 422, "a JSON list"),
        (b'"a"', 422, "a JSON string"),
        (b'{"text": "a", "lang": "zh"}', 422, "Unknown field 'lang'"),
        (b"{}", 422, 'No "text" or "texts"'),
        (b'{"text": "a", "texts": ["b"]}', 422, "not both"),
        (b'{"text": 3}', 422, '"text" is a number'),
        (b'{"text": null}', 422, '"text" is a null'),
        (b'{"text": ""}', 422, '"text" is empty'),
        (b'{"texts": "a"}', 422, '"texts" is a string'),
        (b'{"texts": []}', 422, "empty list"),
        (b'{"texts": ["a", ["b"]]}', 422, '"texts"[1] is a list'),
        (b'{"texts": ["a", "b", "c", "d"]}', 413, "4 texts, more than the limit of 3 (--max-texts)"),
        (b'{"text": "a", "alternatives": "yes"}', 422, '"alternatives" is a string'),
        (b'{"texts": ["a", "b\\ud800"]}', 422, '"texts"[1] has a lone surrogate'),
        (json.dumps({"text": "长" * 101}).encode(), 413, "101 characters, more than the limit of 100 (--max-chars)"),
    ],
)
def test_bad_bodies(body, status, words):
    with pytest.raises(BadRequest) as caught:
        parse_body(body, **LIMITS)
    assert caught.value.status == status
    assert words in caught.value.message
    assert "\n" not in caught.value.message


def test_a_10_mb_text_is_refused_at_the_default_limit():
    from spacy_cner.serve.settings import ServeSettings

    limit = ServeSettings("m").max_chars
    with pytest.raises(BadRequest) as caught:
        parse_body(json.dumps({"text": "a" * 10_000_000}).encode(), max_chars=limit, max_texts=1)
    assert caught.value.status == 413
