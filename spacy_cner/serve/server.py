"""uvicorn running the app: one process with the pipeline already loaded, or --workers processes that each
load it (uvicorn's supervisor, the settings in the environment). On SIGTERM or Ctrl+C uvicorn stops
listening (new connections are refused), lets the requests in flight finish (up to graceful_seconds), and
the app's shutdown drains the batcher."""

import ipaddress
import logging
import os
from typing import Optional

from spacy.language import Language

from .settings import ServeSettings

logger = logging.getLogger("spacy_cner.serve")


def serve(settings: ServeSettings, nlp: Optional[Language] = None, access_log: bool = False) -> None:
    """Serve the pipeline until SIGTERM or SIGINT.

    settings (ServeSettings): The model, address, workers, batching and limits.
    nlp (Optional[Language]): The pipeline, loaded (one worker only); None: each worker loads settings.model.
    access_log (bool): Log every request (uvicorn's access log).
    """
    import uvicorn

    if nlp is not None and settings.workers != 1:
        raise ValueError("A loaded pipeline serves one worker: pass nlp=None for --workers > 1.")
    if not is_loopback(settings.host):
        logger.warning(
            "Listening on %s: reachable from other machines, with no authentication; put it behind a proxy "
            "that has one (docs/serving.md).",
            settings.host,
        )
    options = dict(
        host=settings.host,
        port=settings.port,
        lifespan="on",
        access_log=access_log,
        timeout_graceful_shutdown=settings.graceful_seconds,
        log_level="info",
    )
    if settings.workers == 1:
        from .app import create_app

        uvicorn.run(create_app(settings, nlp), **options)
    else:
        os.environ.update(settings.to_environment())
        uvicorn.run("spacy_cner.serve.app:app_from_environment", factory=True, workers=settings.workers, **options)


def is_loopback(host: str) -> bool:
    """Whether host is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
