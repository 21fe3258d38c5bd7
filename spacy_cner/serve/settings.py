"""What `serve` is asked: the model, where it listens, the batching and the limits on a request."""

import dataclasses
import json
import os
from typing import Any, Dict, Optional

# Where a --workers process reads the settings (uvicorn starts each worker from an import string).
SETTINGS_ENV = "SPACY_CNER_SERVE_SETTINGS"


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """The settings of one server (every worker process has the same).

    model (str): Pipeline name or path.
    host (str): The address to listen on: 127.0.0.1 (this machine only) unless asked.
    port (int): The port (0: any free one).
    workers (int): Processes, each with its own copy of the pipeline and its own batcher.
    max_batch (int): The most texts in one nlp.pipe call.
    max_wait_ms (float): Milliseconds a batch waits, after its first text, for others to join it.
    max_queue (int): The most texts waiting or being annotated; beyond it a request gets 503 + Retry-After.
    max_chars (int): The longest text, in characters; a longer one gets 413.
    max_texts (int): The most texts in one request.
    max_body_bytes (int): The largest request body.
    threads (Optional[int]): torch's threads for nlp.pipe (torch.set_num_threads, and the torch_threads of each
        component that has one: crf_ner and lac_tagger set torch's threads around their calls, 1 by default);
        None leaves both as they are.
    graceful_seconds (float): On SIGTERM, how long requests in flight have to finish.
    freeze_gc (bool): Once the model is loaded and warmed up, take every object alive then out of the cyclic
        garbage collector's reach (gc.freeze: its full collections would walk the whole pipeline under load).
        It acts on the whole process: `serve` always does it; an app built by create_app inside a process
        that does more than serve may turn it off.
    """

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    max_batch: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 1024
    max_chars: int = 100_000
    max_texts: int = 256
    max_body_bytes: int = 16 * 1024 * 1024
    threads: Optional[int] = None
    graceful_seconds: float = 30.0
    freeze_gc: bool = True

    def __post_init__(self) -> None:
        positive = {
            "workers": self.workers,
            "max_batch": self.max_batch,
            "max_queue": self.max_queue,
            "max_chars": self.max_chars,
            "max_texts": self.max_texts,
            "max_body_bytes": self.max_body_bytes,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, not {value}.")
        if self.max_wait_ms < 0:
            raise ValueError(f"--max-wait-ms must be 0 or more, not {self.max_wait_ms}.")
        if self.max_queue < self.max_batch:
            raise ValueError(
                f"--max-queue ({self.max_queue}) must be at least --max-batch ({self.max_batch}): "
                "a full batch must fit in the queue."
            )
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads must be at least 1, not {self.threads}.")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be between 0 and 65535, not {self.port}.")

    def to_environment(self) -> Dict[str, str]:
        """The settings as the environment variable a worker process reads (from_environment)."""
        return {SETTINGS_ENV: json.dumps(dataclasses.asdict(self))}

    @classmethod
    def from_environment(cls, environ: Optional[Dict[str, Any]] = None) -> "ServeSettings":
        environ = os.environ if environ is None else environ
        if SETTINGS_ENV not in environ:
            raise ValueError(
                f"No serve settings in ${SETTINGS_ENV}: start the server with `python -m spacy_cner serve`."
            )
        return cls(**json.loads(environ[SETTINGS_ENV]))
