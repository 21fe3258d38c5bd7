"""What the serve tests share: the app under uvicorn in a thread on a free loopback port, a stdlib HTTP
client, and tiny pipelines (the toy crf_ner, a slow one, one with fixed entities and alternatives)."""

import contextlib
import functools
import http.client
import json
import threading
import time
from typing import Any, Dict, Iterator, Optional, Tuple

import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span, SpanGroup
from thinc.api import fix_random_seed

from conftest import make_examples
from spacy_cner.pipeline import decoding  # noqa: F401  (ent._.score)
from spacy_cner.serve.app import create_app
from spacy_cner.serve.settings import ServeSettings

# The fixed pipeline's text, entities and alternatives (fixed_ner).
SAMPLE = "张三在北京工作。"


class Server:
    """A running server: its port and the uvicorn.Server (should_exit = True is what SIGTERM does)."""

    def __init__(self, server, thread: threading.Thread, port: int):
        self.server = server
        self.thread = thread
        self.port = port

    def request(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None):
        return request(self.port, method, path, body, headers)

    def post(self, body: Any):
        return self.request("POST", "/v1/entities", body)


def request(
    port: int, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None, timeout=60
) -> Tuple[int, Dict[str, str], Any]:
    """One request on a new connection: (status, headers, the JSON answer or the text)."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body, ensure_ascii=False).encode("utf8")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        answer_headers = {key.lower(): value for key, value in response.getheaders()}
    finally:
        connection.close()
    if answer_headers.get("content-type", "").startswith("application/json"):
        return response.status, answer_headers, json.loads(data)
    return response.status, answer_headers, data.decode("utf8")


@contextlib.contextmanager
def running(settings: ServeSettings, nlp: Optional[Language] = None, ready: bool = True) -> Iterator[Server]:
    """The app under uvicorn in a thread, on a free port of 127.0.0.1; ready: wait for /readyz first."""
    import uvicorn

    config = uvicorn.Config(
        create_app(settings, nlp),
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=settings.graceful_seconds,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    running_server = Server(server, thread, port)
    try:
        if ready:
            while request(port, "GET", "/readyz")[0] != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not get ready")
                time.sleep(0.02)
        yield running_server
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def settings(**overrides) -> ServeSettings:
    """The tests' settings: no gc.freeze (the servers run inside pytest's process) unless a test asks."""
    return ServeSettings(**{"model": "test", "graceful_seconds": 10.0, "freeze_gc": False, **overrides})


# A crf_ner without an encoder (fast to train): the toy corpus's entities, scores and alternatives.
TOY_MODEL = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {
        "@architectures": "spacy-cner.CharBigramEmbed.v1",
        "width": 16,
        "char_rows": 200,
        "bigram_rows": 200,
        "bigram_dropout": 0.0,
    },
    "encoder": None,
}


def _toy() -> Language:
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": TOY_MODEL})
    return nlp


@functools.lru_cache(maxsize=None)
def _toy_bytes() -> bytes:
    fix_random_seed(0)
    nlp = _toy()
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    return nlp.to_bytes()


def toy_nlp() -> Language:
    """A tiny crf_ner pipeline overfit to the toy corpus (conftest.TRAIN_DATA), trained once per process."""
    return _toy().from_bytes(_toy_bytes())


@Language.component("test_serve_slow")
def slow(doc: Doc) -> Doc:
    """Sleeps 50 ms per doc (ran under the crf_ner): requests stay in flight long enough to be counted."""
    time.sleep(0.05)
    return doc


def slow_nlp() -> Language:
    nlp = toy_nlp()
    nlp.add_pipe("test_serve_slow", first=True)
    return nlp


class FixedNer:
    """Entities, probabilities and alternatives known in advance (the page test reads them)."""

    spans_key = "crf_ner"
    labels = ("LOC", "ORG", "PER")

    def __call__(self, doc: Doc) -> Doc:
        found = []
        for word, label, score in (("张三", "PER", 0.97), ("北京", "LOC", 0.91)):
            start = doc.text.find(word)
            if start >= 0:
                found.append((doc.char_span(start, start + len(word), label=label), score))
        doc.ents = [span for span, _ in found]
        spans, scores = [], []
        for span, score in found:
            span._.score = score
            spans.append(span)
            scores.append(score)
            if span.label_ == "LOC":  # 北京 as an organisation, and 北京工作 as a place
                spans += [Span(doc, span.start, span.end, "ORG"), Span(doc, span.start, span.end + 2, "LOC")]
                scores += [0.06, 0.02]
        group = SpanGroup(doc, name="crf_ner", spans=spans)
        group.attrs["scores"] = scores
        doc.spans["crf_ner"] = group
        return doc


@Language.factory("test_serve_fixed_ner", assigns=["doc.ents"])
def make_fixed_ner(nlp: Language, name: str) -> FixedNer:
    return FixedNer()


def fixed_nlp() -> Language:
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_serve_fixed_ner", name="ner")
    return nlp
