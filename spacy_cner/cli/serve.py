"""`serve`: a pipeline behind an HTTP API with micro-batching, and a page to look at its entities."""

from typing import Optional

import typer

from ._app import app, msg


@app.command("serve")
def serve_command(
    model: str = typer.Argument(..., help="Pipeline name or path: crf_ner, the ready LAC pipeline or a student."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (127.0.0.1: this machine only)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on (0: any free one)."),
    workers: int = typer.Option(1, "--workers", help="Processes, each loading the pipeline (about one per core)."),
    max_batch: int = typer.Option(64, "--max-batch", help="The most texts in one nlp.pipe call."),
    max_wait_ms: float = typer.Option(
        5.0, "--max-wait-ms", help="Milliseconds a batch waits, after its first text, for others to join it."
    ),
    max_queue: int = typer.Option(
        1024, "--max-queue", help="The most texts waiting or in a batch; past it requests get 503 + Retry-After."
    ),
    max_chars: int = typer.Option(100_000, "--max-chars", help="The longest text (characters); longer: 413."),
    max_texts: int = typer.Option(256, "--max-texts", help="The most texts in one request."),
    max_body_bytes: int = typer.Option(16 * 1024 * 1024, "--max-body-bytes", help="The largest request body."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="torch threads per worker (default: each component's torch_threads, 1 for crf_ner)."
    ),
    graceful_seconds: float = typer.Option(
        30.0, "--graceful-seconds", help="On SIGTERM, how long requests in flight have to finish."
    ),
    access_log: bool = typer.Option(False, "--access-log", help="Log every request."),
) -> None:
    """Serve a pipeline over HTTP: POST /v1/entities (the rows `annotate` writes), a page at /, /healthz,
    /readyz, /v1/model and /metrics (docs/serving.md). Needs the serve extra: pip install "spacy-cner[serve]"."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        msg.fail(f'serve needs Starlette and uvicorn ({err}): pip install "spacy-cner[serve]"', exits=1)
    from ..serve.app import ServedModel
    from ..serve.server import serve
    from ..serve.settings import ServeSettings

    try:
        settings = ServeSettings(
            model,
            host=host,
            port=port,
            workers=workers,
            max_batch=max_batch,
            max_wait_ms=max_wait_ms,
            max_queue=max_queue,
            max_chars=max_chars,
            max_texts=max_texts,
            max_body_bytes=max_body_bytes,
            threads=threads,
            graceful_seconds=graceful_seconds,
        )
    except ValueError as err:
        msg.fail(str(err), exits=1)
    # The pipeline loads here first, so that a wrong name or a pipeline with nothing to serve fails in one
    # line before the server starts (--workers processes then load their own copies).
    import spacy

    try:
        nlp = spacy.load(model)
    except OSError as err:
        msg.fail(f"Cannot serve the pipeline {model!r}: {err}", exits=1)
    try:
        ServedModel(nlp, settings)
    except ValueError as err:  # it names the pipeline
        msg.fail(str(err), exits=1)
    where = f"http://{host}:{port}" if port else f"{host} on a free port (uvicorn's line below names it)"
    plural = "s" if workers > 1 else ""
    msg.info(f"Serving {model} at {where}, {workers} worker{plural}; Ctrl+C or SIGTERM stops")
    serve(settings, nlp if workers == 1 else None, access_log=access_log)
