"""GET /metrics' text: Prometheus' exposition format, cumulative histogram buckets."""

from spacy_cner.serve.metrics import Metrics


def test_counters_and_histograms():
    metrics = Metrics()
    metrics.observe_request("/v1/entities", 200, 0.02)
    metrics.observe_request("/v1/entities", 200, 0.3)
    metrics.observe_request("/v1/entities", 422, 0.001)
    metrics.observe_batch(["张三", "北京市"], 0.01)
    text = metrics.render(queue=3, queue_limit=10, ready=True)
    lines = text.splitlines()
    assert 'spacy_cner_requests_total{path="/v1/entities",status="200"} 2' in lines
    assert 'spacy_cner_requests_total{path="/v1/entities",status="422"} 1' in lines
    assert 'spacy_cner_request_seconds_bucket{le="0.025"} 1' in lines
    assert 'spacy_cner_request_seconds_bucket{le="0.5"} 2' in lines
    assert 'spacy_cner_request_seconds_bucket{le="+Inf"} 2' in lines
    assert "spacy_cner_request_seconds_count 2" in lines
    assert 'spacy_cner_batch_texts_bucket{le="1"} 0' in lines and 'spacy_cner_batch_texts_bucket{le="2"} 1' in lines
    assert "spacy_cner_chars_total 5" in lines and "spacy_cner_texts_total 2" in lines
    assert "spacy_cner_queue_texts 3" in lines and "spacy_cner_ready 1" in lines
    for line in lines:  # every sample has a HELP and TYPE before it
        if not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            base = name.rsplit("_bucket", 1)[0].rsplit("_sum", 1)[0].rsplit("_count", 1)[0]
            assert f"# TYPE {base} " in text or f"# TYPE {name} " in text, line
