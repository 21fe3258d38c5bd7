"""The ASGI app (Starlette): POST /v1/entities through the micro-batcher, the page at GET /, GET /healthz,
/readyz, /v1/model and /metrics.

The rows are annotate's (annotate/records.py: doc_record), so that a text gets the same record from the
server as from `annotate` over a text file. Every answer that is not a 200 is JSON, {"error": "one line"}.
"""

import asyncio
import contextlib
import gc
import logging
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from spacy.language import Language
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..annotate.inputs import Row
from ..annotate.records import doc_record, pipe_rows, scores_key
from ..pipeline import decoding  # noqa: F401  (registers ent._.score, which the rows read)
from .batcher import Closed, MicroBatcher, Overloaded
from .body import BadRequest, parse_body
from .metrics import Metrics
from .settings import ServeSettings

logger = logging.getLogger("spacy_cner.serve")
STATIC = Path(__file__).parent / "static"
# The components that find entities, besides those whose factory says it assigns doc.ents (crf_ner, ner):
# their labels are the entity labels /v1/model lists.
ENTITY_FACTORIES = ("crf_ner", "lac_tagger", "ner")
# Annotated once before /readyz says ready, so that the first request does not pay for the first call.
WARM_UP_TEXTS = ["张三在北京的阿里巴巴工作。", "2024年5月，李四去了上海。"]
# Seconds a request body has to arrive in (a client that stops sending gets 408, not a held connection).
BODY_TIMEOUT = 30.0
# displaCy colours the labels of OntoNotes: a label of the Chinese corpora takes the colour of its OntoNotes
# counterpart (Resume: NAME, CONT for country, RACE for ethnicity); the others get displaCy's default.
COLOUR_ALIASES = {"PER": "PERSON", "NAME": "PERSON", "CONT": "GPE", "RACE": "NORP"}


class ServedModel:
    """The pipeline and what the rows and /v1/model need from it."""

    def __init__(self, nlp: Language, settings: ServeSettings):
        entity_pipes = [
            name
            for name in nlp.pipe_names
            if nlp.get_pipe_meta(name).factory in ENTITY_FACTORIES or "doc.ents" in nlp.get_pipe_meta(name).assigns
        ]
        if not entity_pipes:
            raise ValueError(
                f"The pipeline {settings.model!r} has no {', '.join(ENTITY_FACTORIES[:-1])} or {ENTITY_FACTORIES[-1]} "
                "component, nor another that assigns doc.ents "
                f"(its pipes: {', '.join(nlp.pipe_names) or 'none'}): it finds no entities to serve."
            )
        if settings.max_chars > nlp.max_length:
            raise ValueError(
                f"--max-chars {settings.max_chars} is more than the pipeline's nlp.max_length ({nlp.max_length}): "
                "lower --max-chars."
            )
        self.nlp = nlp
        self.spans_key = scores_key(nlp)
        self.labels = sorted({label for name in entity_pipes for label in getattr(nlp.get_pipe(name), "labels", ())})
        self.entity_pipes = entity_pipes

    def annotate(self, items: List[Tuple[str, bool]]) -> List[Dict[str, Any]]:
        """(text, alternatives) pairs to their rows, through one nlp.pipe call."""
        rows = [(Row({"text": text}, text=text), alternatives) for text, alternatives in items]
        records = []
        for row, alternatives, doc in pipe_rows(self.nlp, rows, batch_size=max(len(rows), 1)):
            if doc is None:  # parse_body checked the text: nothing is left that pipe_rows refuses
                raise RuntimeError(f"a text could not be annotated: {row.error}")
            records.append(doc_record(doc, row, "entities", self.spans_key, alternatives=alternatives))
        return records

    def card(self, settings: ServeSettings) -> Dict[str, Any]:
        """GET /v1/model: what the pipeline is and what it was scored."""
        meta = self.nlp.meta
        return {
            "name": f"{meta.get('lang', self.nlp.lang)}_{meta.get('name', 'pipeline')}",
            "version": meta.get("version"),
            "model": settings.model,
            "description": meta.get("description", ""),
            "pipeline": list(self.nlp.pipe_names),
            "entity_components": self.entity_pipes,
            "labels": self.labels,
            "colors": label_colours(self.labels),
            "performance": meta.get("performance", {}),
            "alternatives": self.spans_key is not None,
            "spans_key": self.spans_key,
            "spacy_version": meta.get("spacy_version"),
            "spacy_cner_version": __version__,
            "limits": {
                "max_chars": settings.max_chars,
                "max_texts": settings.max_texts,
                "max_body_bytes": settings.max_body_bytes,
                "max_batch": settings.max_batch,
                "max_queue": settings.max_queue,
            },
        }


def label_colours(labels: List[str]) -> Dict[str, str]:
    """displaCy's colour of each label (its table, and colours registered in spaCy's displacy_colors)."""
    from spacy.displacy.render import EntityRenderer

    renderer = EntityRenderer({})
    return {
        label: renderer.colors.get(label.upper())
        or renderer.colors.get(COLOUR_ALIASES.get(label.upper(), ""), renderer.default_color)
        for label in labels
    }


class ServerState:
    """The model (loaded in the background, so that /healthz answers meanwhile), the batcher, the metrics."""

    def __init__(self, settings: ServeSettings, nlp: Optional[Language] = None):
        self.settings = settings
        self.metrics = Metrics()
        self.model: Optional[ServedModel] = None
        self.ready = False
        self.load_error: Optional[str] = None
        self._nlp = nlp
        self._loading: Optional["asyncio.Task"] = None
        self.batcher = MicroBatcher(
            self._annotate,
            max_batch=settings.max_batch,
            max_wait=settings.max_wait_ms / 1000,
            max_queue=settings.max_queue,
            on_batch=lambda items, seconds: self.metrics.observe_batch([text for text, _ in items], seconds),
        )

    def _annotate(self, items: List[Tuple[str, bool]]) -> List[Dict[str, Any]]:
        return self.model.annotate(items)

    async def start(self) -> None:
        await self.batcher.start()
        self._loading = asyncio.get_running_loop().create_task(self._load())

    async def stop(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        await self.batcher.close()

    async def _load(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            self.model = await loop.run_in_executor(None, self._load_model)
            await self.batcher.run_now([(text, self.model.spans_key is not None) for text in WARM_UP_TEXTS])
            if self.settings.freeze_gc:
                freeze_loaded_objects()
        except Exception as err:
            self.load_error = f"{type(err).__name__}: {' '.join(str(err).split())}"
            logger.exception("The model %r could not be served: %s", self.settings.model, self.load_error)
            return
        self.ready = True
        logger.info("Ready: %s (labels %s)", self.settings.model, ", ".join(self.model.labels))

    def _load_model(self) -> ServedModel:
        if self.settings.threads is not None:
            import torch

            torch.set_num_threads(self.settings.threads)
        nlp = self._nlp
        if nlp is None:
            import spacy

            nlp = spacy.load(self.settings.model)
        if self.settings.threads is not None:  # the components set torch's threads around their own calls
            for _, pipe in nlp.pipeline:
                if hasattr(pipe, "torch_threads"):
                    pipe.torch_threads = self.settings.threads
        served = ServedModel(nlp, self.settings)
        for _, pipe in nlp.pipeline:  # crf_ner's lexicon indexes and torch's first call, before the warm-up texts
            if callable(getattr(pipe, "warm_up", None)):
                pipe.warm_up()
        return served


def freeze_loaded_objects() -> None:
    """Move every object alive now (the loaded, warmed-up pipeline) out of the cyclic garbage collector's reach.

    A served process holds hundreds of thousands of long-lived containers (what torch's and spaCy's imports
    leave alive, the lexicon's word lists), and each full collection of the oldest generation walks all of
    them: a stall of the nlp.pipe thread longer than a batch, several times a minute under load, which every
    request of the batch it hits waits out; those stalls made most of the p99 latency (BENCHMARKS.md#serving).
    Python's documentation advises gc.freeze for such a process (a large heap loaded once, then serving):
    frozen objects are still freed by reference counting, only reference cycles among them are never
    collected.
    """
    gc.collect()
    gc.freeze()


def create_app(settings: ServeSettings, nlp: Optional[Language] = None) -> Starlette:
    """The server's ASGI app.

    settings (ServeSettings): The model, the batching and the limits.
    nlp (Optional[Language]): The pipeline, already loaded; None loads settings.model at startup (in the
        background: /healthz answers at once, /readyz once it is loaded and warmed up).
    RETURNS (Starlette): The app, for uvicorn (or any ASGI server, or Ray Serve's ingress).
    """
    state = ServerState(settings, nlp)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        await state.start()
        try:
            yield
        finally:
            await state.stop()

    def not_ready() -> Response:
        if state.load_error is not None:
            return error(503, f"The model could not be loaded: {state.load_error}")
        return error(503, "The model is loading or warming up: retry shortly.", retry_after=1)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        if not state.ready:
            return not_ready()
        return JSONResponse({"status": "ready", "model": settings.model})

    async def model_card(request: Request) -> Response:
        if not state.ready:
            return not_ready()
        return JSONResponse(state.model.card(settings))

    async def metrics(request: Request) -> Response:
        text = state.metrics.render(state.batcher.pending, settings.max_queue, state.ready)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def entities(request: Request) -> Response:
        if not state.ready:
            return not_ready()
        try:
            body = await asyncio.wait_for(read_body(request, settings.max_body_bytes), BODY_TIMEOUT)
            asked = parse_body(body, settings.max_chars, settings.max_texts)
        except BadRequest as err:
            return error(err.status, err.message)
        except asyncio.TimeoutError:
            return error(408, f"The request body did not arrive within {BODY_TIMEOUT:g} seconds.")
        if asked.alternatives and state.model.spans_key is None:
            return error(
                422,
                "This pipeline keeps no alternatives (no crf_ner with a spans_key): "
                'leave out "alternatives" or set it to false.',
            )
        try:
            rows = await state.batcher.submit([(text, asked.alternatives) for text in asked.texts])
        except Overloaded as err:
            state.metrics.overloaded += 1
            return error(503, f"Overloaded: {err}.", retry_after=err.retry_after)
        except Closed:
            return error(503, "The server is shutting down: retry on another instance.", retry_after=1)
        return JSONResponse(rows[0] if asked.single else {"results": rows})

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def http_error(request: Request, exc: HTTPException) -> Response:
        reason = {404: f"No such page {request.url.path!r}", 405: f"{request.method} is not allowed here"}
        return error(exc.status_code, reason.get(exc.status_code, str(exc.detail)) + _allowed(exc))

    async def server_error(request: Request, exc: Exception) -> Response:
        logger.exception("Error answering %s %s", request.method, request.url.path)
        return error(500, f"Internal error: {type(exc).__name__}: {' '.join(str(exc).split())}")

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/model", model_card, methods=["GET"]),
        Route("/v1/entities", entities, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    app.state.server = state
    app.add_middleware(MetricsMiddleware, metrics=state.metrics, paths={route.path for route in routes})
    return app


def app_from_environment() -> Starlette:
    """The app of a --workers process (uvicorn's factory): the settings from the environment."""
    return create_app(ServeSettings.from_environment())


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or BadRequest (413) as soon as it is over limit bytes (never held whole)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise BadRequest(413, f"The body is {int(length)} bytes, more than the limit of {limit} (--max-body-bytes).")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"The body is more than the limit of {limit} bytes (--max-body-bytes).")
        chunks.append(chunk)
    return b"".join(chunks)


def error(status: int, message: str, retry_after: Optional[int] = None) -> Response:
    """A 4xx or 5xx answer: {"error": message} (one line), with Retry-After where given."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": " ".join(message.split())}, status_code=status, headers=headers)


def _allowed(exc: HTTPException) -> str:
    allow = (exc.headers or {}).get("Allow")
    return f" (allowed: {allow})." if allow else "."


class MetricsMiddleware:
    """Counts every HTTP answer by path (the app's routes; "other" for the rest) and status, and times it."""

    def __init__(self, app, metrics: Metrics, paths: set):
        self.app = app
        self.metrics = metrics
        self.paths = paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = scope["path"]
            path = path if path in self.paths else "/static" if path.startswith("/static/") else "other"
            self.metrics.observe_request(path, status, time.perf_counter() - start)
