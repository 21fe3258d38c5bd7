"""The server's metrics in Prometheus' text format (GET /metrics): requests by endpoint and status, the
latency of /v1/entities, the texts per nlp.pipe batch, texts and characters annotated, the queue.

No client library: counters and histograms as the exposition format defines them (cumulative `_bucket`
lines with `le`, `_sum` and `_count`), kept per process (each --workers process has its own).
"""

import bisect
import collections
import math
import time
from typing import Deque, Dict, List, Sequence, Tuple

# Seconds: from a batch of one short text to a long document.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Texts per nlp.pipe call.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The window of the chars/s gauge, in seconds.
RATE_WINDOW = 60.0


class Histogram:
    """Observations counted into cumulative buckets (Prometheus' histogram)."""

    def __init__(self, buckets: Sequence[float]):
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last: above every bucket (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> List[str]:
        lines = []
        total = 0
        for bound, count in zip((*self.buckets, math.inf), self.counts):
            total += count
            le = "+Inf" if bound == math.inf else _number(bound)
            lines.append(f'{name}_bucket{{le="{le}"}} {total}')
        return lines + [f"{name}_sum {_number(self.sum)}", f"{name}_count {self.count}"]


class Metrics:
    """What GET /metrics reports, updated by the app (requests) and the batcher (batches)."""

    def __init__(self) -> None:
        self.requests: Dict[Tuple[str, int], int] = collections.Counter()
        self.latency = Histogram(LATENCY_BUCKETS)
        self.batch_size = Histogram(BATCH_BUCKETS)
        self.pipe_seconds = 0.0
        self.texts = 0
        self.chars = 0
        self.overloaded = 0
        self._recent: Deque[Tuple[float, int]] = collections.deque()

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        self.requests[(path, status)] += 1
        if path == "/v1/entities" and status == 200:
            self.latency.observe(seconds)

    def observe_batch(self, texts: Sequence[str], seconds: float) -> None:
        chars = sum(len(text) for text in texts)
        self.batch_size.observe(len(texts))
        self.pipe_seconds += seconds
        self.texts += len(texts)
        self.chars += chars
        now = time.monotonic()
        self._recent.append((now, chars))
        while self._recent and self._recent[0][0] < now - RATE_WINDOW:
            self._recent.popleft()

    def chars_per_second(self) -> float:
        """Characters annotated per second over the last RATE_WINDOW seconds."""
        now = time.monotonic()
        return sum(chars for when, chars in self._recent if when >= now - RATE_WINDOW) / RATE_WINDOW

    def render(self, queue: int, queue_limit: int, ready: bool) -> str:
        """The exposition text."""
        out = [
            "# HELP spacy_cner_requests_total Requests answered, by path and status.",
            "# TYPE spacy_cner_requests_total counter",
        ]
        for (path, status), count in sorted(self.requests.items()):
            out.append(f'spacy_cner_requests_total{{path="{_label(path)}",status="{status}"}} {count}')
        out += [
            "# HELP spacy_cner_request_seconds Latency of the answered /v1/entities requests (200).",
            "# TYPE spacy_cner_request_seconds histogram",
            *self.latency.lines("spacy_cner_request_seconds"),
            "# HELP spacy_cner_batch_texts Texts per nlp.pipe call.",
            "# TYPE spacy_cner_batch_texts histogram",
            *self.batch_size.lines("spacy_cner_batch_texts"),
            "# HELP spacy_cner_pipe_seconds_total Seconds spent in nlp.pipe.",
            "# TYPE spacy_cner_pipe_seconds_total counter",
            f"spacy_cner_pipe_seconds_total {_number(self.pipe_seconds)}",
            "# HELP spacy_cner_texts_total Texts annotated.",
            "# TYPE spacy_cner_texts_total counter",
            f"spacy_cner_texts_total {self.texts}",
            "# HELP spacy_cner_chars_total Characters annotated.",
            "# TYPE spacy_cner_chars_total counter",
            f"spacy_cner_chars_total {self.chars}",
            f"# HELP spacy_cner_chars_per_second Characters annotated per second over the last {RATE_WINDOW:g} s.",
            "# TYPE spacy_cner_chars_per_second gauge",
            f"spacy_cner_chars_per_second {_number(self.chars_per_second())}",
            "# HELP spacy_cner_overloaded_total Requests refused with 503 because the queue was full.",
            "# TYPE spacy_cner_overloaded_total counter",
            f"spacy_cner_overloaded_total {self.overloaded}",
            "# HELP spacy_cner_queue_texts Texts waiting or in the running batch.",
            "# TYPE spacy_cner_queue_texts gauge",
            f"spacy_cner_queue_texts {queue}",
            "# HELP spacy_cner_queue_limit The most texts the queue holds (--max-queue).",
            "# TYPE spacy_cner_queue_limit gauge",
            f"spacy_cner_queue_limit {queue_limit}",
            "# HELP spacy_cner_ready Whether the model is loaded and warmed up (1) or not (0).",
            "# TYPE spacy_cner_ready gauge",
            f"spacy_cner_ready {int(ready)}",
        ]
        return "\n".join(out) + "\n"


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
