"""The server over real HTTP (uvicorn on a loopback port, in a thread): annotate's rows, batch invariance,
bad input as 4xx, overload as 503 + Retry-After, a bounded load test, metrics, graceful shutdown."""

import gc
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from serve_helpers import SAMPLE, fixed_nlp, running, settings, slow_nlp, toy_nlp
from toy_pipe import TEXTS

from spacy_cner.annotate import AnnotateJob, annotate
from spacy_cner.annotate.inputs import Row
from spacy_cner.annotate.records import doc_record

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, Starlette) is not installed")

HELD_OUT = ["张三在深圳工作", "李四去了北京", "阿里巴巴总部在杭州", "王五是腾讯的员工", "我在北京市工作", "上海"]


@pytest.fixture(scope="module")
def toy_server():
    with running(settings(max_batch=8, max_wait_ms=20.0), toy_nlp()) as server:
        yield server


def alone(nlp, text):
    """The row of a text annotated alone."""
    return doc_record(nlp(text), Row({"text": text}, text=text), "entities", "crf_ner")


def same_rows(got, expected):
    """Rows equal but for the scores' last bits (a batch's float sums)."""
    assert [(r["text"], [{k: v for k, v in e.items() if k != "score"} for e in r["entities"]]) for r in got] == [
        (r["text"], [{k: v for k, v in e.items() if k != "score"} for e in r["entities"]]) for r in expected
    ]
    scores = [e["score"] for r in got for e in r["entities"]]
    assert scores == pytest.approx([e["score"] for r in expected for e in r["entities"]], abs=1e-5)


def test_the_rows_are_those_annotate_writes(toy_server, tmp_path):
    nlp = toy_nlp()
    nlp.to_disk(tmp_path / "model")
    texts = [text for text in TEXTS + HELD_OUT if text.strip() and "\n" not in text]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    annotate(AnnotateJob(str(tmp_path / "model")), str(tmp_path / "in.txt"), tmp_path / "out")
    shard = tmp_path / "out" / "in.00000.jsonl"
    written = [json.loads(line) for line in shard.read_text(encoding="utf8").splitlines()]
    status, _, answer = toy_server.post({"texts": texts})
    assert status == 200
    same_rows(answer["results"], written)
    assert all("score" in e for r in answer["results"] for e in r["entities"])
    status, _, one = toy_server.post({"text": texts[0]})
    assert status == 200 and set(one) == {"text", "entities"}
    same_rows([one], written[:1])


def test_a_texts_entities_do_not_depend_on_its_batch(toy_server):
    """The invariance tests over HTTP: each text alone, in one list, and in concurrent requests that the
    batcher mixes into shared batches."""
    nlp = toy_nlp()
    expected = [alone(nlp, text) for text in HELD_OUT]
    status, _, answer = toy_server.post({"texts": HELD_OUT})
    assert status == 200
    same_rows(answer["results"], expected)
    with ThreadPoolExecutor(len(HELD_OUT) * 2) as pool:
        answers = list(pool.map(lambda text: toy_server.post({"text": text}), HELD_OUT * 2))
    assert all(status == 200 for status, _, _ in answers)
    same_rows([row for _, _, row in answers], expected * 2)


def test_alternatives_are_the_other_scored_spans():
    with running(settings(), fixed_nlp()) as server:
        status, _, row = server.post({"text": SAMPLE, "alternatives": True})
    assert status == 200
    found = [(e["text"], e["label"], e["score"]) for e in row["entities"]]
    assert found == [("张三", "PER", 0.97), ("北京", "LOC", 0.91)]
    assert [(a["text"], a["label"], a["score"]) for a in row["alternatives"]] == [
        ("北京", "ORG", pytest.approx(0.06)),
        ("北京工作", "LOC", pytest.approx(0.02)),
    ]


def test_bad_input_is_a_4xx_with_one_line(toy_server):
    cases = [
        (b"\xff\xfe", 400),
        (b"{not json", 400),
        ('{"text": "\\ud800"}'.encode(), 422),
        (b'{"text": ""}', 422),
        (json.dumps({"text": "a" * 100_001}).encode(), 413),
        (json.dumps({"texts": ["a"] * 257}).encode(), 413),
        (b'{"texts": [1]}', 422),
        (b'{"text": "a", "x": 1}', 422),
    ]
    for body, expected in cases:
        status, headers, answer = toy_server.request("POST", "/v1/entities", body)
        assert status == expected, (body[:40], answer)
        assert headers["content-type"].startswith("application/json")
        assert set(answer) == {"error"} and "\n" not in answer["error"] and answer["error"]
    status, _, answer = toy_server.request("GET", "/v1/entities")
    assert status == 405 and "POST" in answer["error"]
    status, _, answer = toy_server.request("GET", "/nowhere")
    assert status == 404


def test_a_body_over_the_limit_is_refused_before_it_is_read():
    with running(settings(max_body_bytes=1000), fixed_nlp()) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.putrequest("POST", "/v1/entities")
        connection.putheader("Content-Length", str(50_000_000))
        connection.endheaders()  # no body sent: the answer must not wait for 50 MB
        response = connection.getresponse()
        assert response.status == 413
        assert "--max-body-bytes" in json.loads(response.read())["error"]
        connection.close()
        status, _, answer = server.post({"texts": ["张三" * 300]})
        assert status == 413 and "more than the limit of 1000" in answer["error"]


def test_health_readiness_model_and_metrics(toy_server):
    assert toy_server.request("GET", "/healthz")[:3:2] == (200, {"status": "ok"})
    assert toy_server.request("GET", "/readyz")[0] == 200
    status, _, card = toy_server.request("GET", "/v1/model")
    assert status == 200 and card["labels"] == ["LOC", "ORG", "PER"] and card["alternatives"] is True
    assert card["colors"] == {"LOC": "#ff9561", "ORG": "#7aecec", "PER": "#aa9cfc"}  # displaCy's (PER: PERSON's)
    assert "performance" in card and card["limits"]["max_batch"] == 8
    toy_server.post({"texts": ["张三去了上海", "北京"]})
    status, headers, text = toy_server.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert int(values['spacy_cner_requests_total{path="/v1/entities",status="200"}']) >= 1
    assert int(values["spacy_cner_request_seconds_count"]) >= 1
    assert int(values["spacy_cner_chars_total"]) >= 8
    assert int(values["spacy_cner_batch_texts_count"]) >= 1


@pytest.mark.parametrize("freeze_gc", [True, False])
def test_the_loaded_pipeline_is_frozen_out_of_the_collector_before_ready(freeze_gc):
    """With freeze_gc the objects alive once the model is warmed up (the pipeline's among them) are out of
    the cyclic collector's walks (gc.freeze): its full collections stalled batches under load."""
    gc.unfreeze()
    try:
        with running(settings(freeze_gc=freeze_gc), fixed_nlp()) as server:
            frozen = gc.get_freeze_count()
            assert server.post({"text": SAMPLE})[0] == 200
        assert (frozen > 0) is freeze_gc
    finally:
        gc.unfreeze()


def test_threads_set_torchs_and_each_components_own():
    """--threads N is torch's count in the worker and the torch_threads of each component that sets its own
    around its calls (crf_ner's default of 1 would otherwise win while it predicts); unset, both stay."""
    import torch

    previous = torch.get_num_threads()
    try:
        nlp = toy_nlp()
        with running(settings(threads=2), nlp) as server:
            assert server.post({"text": SAMPLE})[0] == 200
            assert torch.get_num_threads() == 2 and nlp.get_pipe("crf_ner").torch_threads == 2
        nlp = toy_nlp()
        with running(settings(), nlp) as server:
            assert server.post({"text": SAMPLE})[0] == 200
            assert nlp.get_pipe("crf_ner").torch_threads == 1
    finally:
        torch.set_num_threads(previous)


def test_not_ready_while_the_model_fails_to_load(tmp_path):
    with running(settings(model=str(tmp_path / "no-model")), None, ready=False) as server:
        assert server.request("GET", "/healthz")[0] == 200
        deadline = time.monotonic() + 30
        while True:
            status, headers, answer = server.request("GET", "/readyz")
            if "could not be loaded" in answer["error"] or time.monotonic() > deadline:
                break
            assert status == 503 and headers["retry-after"] == "1"
            time.sleep(0.05)
        assert status == 503 and "could not be loaded" in answer["error"]
        status, _, answer = server.post({"text": "张三"})
        assert status == 503 and "could not be loaded" in answer["error"]


def test_load_below_the_queue_bound_loses_and_duplicates_nothing(toy_server):
    """64 concurrent clients, 2 requests each, bounded in time: every answer a 200 with its own texts."""
    nlp = toy_nlp()
    expected = {text: alone(nlp, text) for text in HELD_OUT}
    n_clients, per_client = 64, 2
    deadline = time.monotonic() + 120

    def client(index):
        rows = []
        connection = http.client.HTTPConnection("127.0.0.1", toy_server.port, timeout=60)
        for request_index in range(per_client):
            if time.monotonic() > deadline:
                break
            texts = [HELD_OUT[(index + request_index + k) % len(HELD_OUT)] for k in range(1 + index % 3)]
            connection.request("POST", "/v1/entities", body=json.dumps({"texts": texts}).encode())
            response = connection.getresponse()
            answer = json.loads(response.read())
            rows.append((response.status, texts, answer))
        connection.close()
        return rows

    with ThreadPoolExecutor(n_clients) as pool:
        results = [row for rows in pool.map(client, range(n_clients)) for row in rows]
    assert len(results) == n_clients * per_client
    for status, texts, answer in results:
        assert status == 200, answer
        same_rows(answer["results"], [expected[text] for text in texts])


def test_overload_is_503_with_retry_after_and_nothing_else_fails():
    with running(settings(max_batch=2, max_queue=4, max_wait_ms=0.0), slow_nlp()) as server:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda i: server.post({"texts": ["张三去了上海", "北京"]}), range(16)))
        statuses = [status for status, _, _ in answers]
        assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses
        for status, headers, answer in answers:
            if status == 503:
                assert int(headers["retry-after"]) >= 1 and "queue is full" in answer["error"]
        metrics = server.request("GET", "/metrics")[2]
        assert f"spacy_cner_overloaded_total {statuses.count(503)}" in metrics


def test_graceful_shutdown_finishes_requests_in_flight_and_refuses_new_ones():
    with running(settings(max_batch=1, max_wait_ms=0.0), slow_nlp()) as server:
        results = []
        texts = [f"张三{i}去了上海" for i in range(12)]
        thread = threading.Thread(target=lambda: results.append(server.post({"texts": texts})))
        thread.start()
        time.sleep(0.1)  # the request is in its batches (50 ms a text)
        server.server.should_exit = True  # what uvicorn does on SIGTERM
        refused = False
        deadline = time.monotonic() + 10
        while not refused and time.monotonic() < deadline:  # uvicorn's loop sees should_exit within 0.1 s
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
                time.sleep(0.02)
            except OSError:
                refused = True
        assert refused and thread.is_alive() and not results  # new connections refused, the request in flight
        thread.join(timeout=30)
        status, _, answer = results[0]
        assert status == 200 and [row["text"] for row in answer["results"]] == texts


def test_the_ready_lac_pipeline_is_served(fake_lac_sdist):
    """A pipeline of lac_tagger (the ready LAC model, here on a fabricated sdist): its rows, no alternatives."""
    from spacy_cner.pretrained.lac import open_lac
    from spacy_cner.pretrained.lac_pipeline import build_pipeline

    nlp = build_pipeline(open_lac(fake_lac_sdist))
    texts = ["张三去了北京市", "上海"]
    expected = [doc_record(nlp(text), Row({"text": text}, text=text), "entities", None) for text in texts]
    # The words' new docs keep their context (nlp.pipe as_tuples, which annotate's rows go through).
    assert [context for _, context in nlp.pipe(zip(texts, "ab"), as_tuples=True)] == ["a", "b"]
    with running(settings(), nlp) as server:
        status, _, card = server.request("GET", "/v1/model")
        assert status == 200 and card["entity_components"] == ["lac_tagger"] and card["alternatives"] is False
        assert set(card["labels"]) == {"PER", "LOC", "ORG", "TIME"}
        status, _, answer = server.post({"texts": texts})
        assert status == 200 and answer["results"] == expected
        status, _, answer = server.post({"text": "上海", "alternatives": True})
        assert status == 422 and "keeps no alternatives" in answer["error"]
