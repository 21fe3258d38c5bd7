"""Serving a pipeline over HTTP: `python -m spacy_cner serve MODEL` (the `[serve]` extra: Starlette, uvicorn).

Where each part lives:
- settings.py: what a server is asked (ServeSettings), and how a --workers process reads it;
- body.py: a POST /v1/entities body read and checked, each fault a 4xx and one line;
- batcher.py: the micro-batcher, concurrent requests' texts into one nlp.pipe call, a bounded queue;
- metrics.py: counters and histograms in Prometheus' text format (GET /metrics);
- app.py: the ASGI app (the routes, the model loaded and warmed up in the background), annotate's rows;
- server.py: uvicorn running the app (one process or --workers), graceful shutdown on SIGTERM;
- static/: the page at GET / (HTML, CSS and JavaScript, no build step, nothing from a CDN).
"""

from .settings import ServeSettings

__all__ = ["ServeSettings", "create_app", "serve"]


def create_app(*args, **kwargs):
    """app.create_app (imported when called: Starlette is an optional extra)."""
    from .app import create_app

    return create_app(*args, **kwargs)


def serve(*args, **kwargs):
    """server.serve (imported when called: uvicorn is an optional extra)."""
    from .server import serve

    return serve(*args, **kwargs)
