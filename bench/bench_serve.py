"""`serve` under load: N concurrent clients (1, 8, 64) over loopback against `python -m spacy_cner serve`, side by
side with offline nlp.pipe on the same texts, the same threads, in the same run.

Usage: python bench/bench_serve.py [--models PATH ...] [--clients 1 8 64] [--seconds 20] [--requests 20000]
       [--texts FILE] [--min-chars 40] [--max-chars 60] [--result serve]

The texts are single sentences of Resume (../shared/data/resume/*.char.bmes, test first) of --min-chars to
--max-chars characters (the issue's target: a 50-character text), or one text per line of --texts. For each model:
offline nlp.pipe chars/s in a child process (batch_size = the server's --max-batch), then the server in its own
process (--threads 1, OMP_NUM_THREADS=1, as the offline child), then for each client count a run bounded by
--seconds and --requests: every client a keep-alive connection sending one text per request and waiting for its
answer (the texts in turn, each answer checked to be its own text); then offline again. The ratio is served chars/s
over the mean of the two offline runs: on a shared machine the load moves, and the two runs bracket the served one.
Latency is per request, as the client sees it; peak memory is the server process's VmHWM; errors are non-200
answers, connection failures and answers that are not the text sent (lost or swapped results).
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from _common import DATA, ROOT, Section, add_result_argument, publish, run_child, single_thread

DEFAULT_MODELS = [
    ROOT / "bench" / "runs" / "serve" / "default" / "model-best",
    ROOT / "bench" / "runs" / "serve" / "student" / "model-best",
]
OFFLINE = """
import json, sys, time
import spacy, torch
torch.set_num_threads(1)
nlp = spacy.load(sys.argv[1])
texts = json.loads(open(sys.argv[2], encoding="utf8").read())
batch_size = int(sys.argv[3])
for _ in nlp.pipe(texts[:batch_size], batch_size=batch_size):  # warm-up, as the server's
    pass
best = None
for _ in range(int(sys.argv[4])):
    start = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=batch_size):
        pass
    seconds = time.perf_counter() - start
    best = seconds if best is None else min(best, seconds)
print("RESULT " + json.dumps({"seconds": best, "chars_per_s": sum(map(len, texts)) / best}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="the most seconds of one client count's run")
    parser.add_argument("--requests", type=int, default=20_000, help="the most requests of one client count's run")
    parser.add_argument("--texts", type=Path, help="one text per line (default: Resume's test sentences)")
    parser.add_argument("--min-chars", type=int, default=40)
    parser.add_argument("--max-chars", type=int, default=60)
    parser.add_argument("--max-batch", type=int, default=64, help="the server's --max-batch, offline's batch_size")
    parser.add_argument("--max-wait-ms", type=float, default=5.0, help="the server's --max-wait-ms")
    parser.add_argument("--offline-repeats", type=int, default=3, help="offline passes, the best kept")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "serve")
    add_result_argument(parser, "serve")
    args = parser.parse_args()
    for model in args.models:
        if not model.exists():
            sys.exit(f"No model at {model}: train one (bench/README.md, `spacy project run all`) or pass --models")
    texts = read_texts(args)
    args.out.mkdir(parents=True, exist_ok=True)
    texts_path = args.out / "bench_texts.json"
    texts_path.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf8")
    print(f"{len(texts)} texts of {statistics.mean(map(len, texts)):.1f} characters on average", file=sys.stderr)
    results = {}
    for model in args.models:
        results[str(model)] = bench_model(model, texts, texts_path, args)
    figures = {
        "models": results,
        "texts": len(texts),
        "mean_chars": statistics.mean(map(len, texts)),
        "settings": {key: getattr(args, key) for key in ("clients", "seconds", "requests", "max_batch", "max_wait_ms")},
    }
    publish(args.result, figures, render(results, args, texts))


def read_texts(args: argparse.Namespace) -> List[str]:
    """The benchmark's texts: --texts' lines, or Resume's sentences (test, dev, train) of --min-chars to
    --max-chars characters."""
    if args.texts is not None:
        return [line for line in args.texts.read_text(encoding="utf8").splitlines() if line.strip()]
    sentences = []
    for split in ("test", "dev", "train"):
        path = DATA / "resume" / f"{split}.char.bmes"
        if not path.exists():
            sys.exit(f"No {path}: pass --texts FILE (one text per line)")
        chars: List[str] = []
        for line in path.read_text(encoding="utf8").splitlines() + [""]:
            if line.strip():
                chars.append(line.split()[0])
            elif chars:
                sentences.append("".join(chars))
                chars = []
    texts = [text for text in sentences if args.min_chars <= len(text) <= args.max_chars]
    if not texts:
        sys.exit(f"No sentence of {args.min_chars}-{args.max_chars} characters in Resume")
    return texts


def offline(model: Path, texts_path: Path, args: argparse.Namespace) -> dict:
    env = single_thread({**os.environ})
    return run_child(OFFLINE, model, texts_path, args.max_batch, args.offline_repeats, env=env, failure=" (offline)")


def bench_model(model: Path, texts: List[str], texts_path: Path, args: argparse.Namespace) -> dict:
    before = offline(model, texts_path, args)
    print(f"{model}: offline {before['chars_per_s']:,.0f} chars/s", file=sys.stderr)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "spacy_cner",
        "serve",
        str(model),
        "--port",
        str(port),
        "--threads",
        "1",
        "--max-batch",
        str(args.max_batch),
        "--max-wait-ms",
        str(args.max_wait_ms),
    ]
    log = (args.out / "serve.log").open("w", encoding="utf8")
    environ = single_thread({**os.environ})
    server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=environ)
    levels = {}
    try:
        wait_ready(port, server, timeout=600)
        for clients in args.clients:
            levels[clients] = asyncio.run(load(port, texts, clients, args.seconds, args.requests))
            level = levels[clients]
            print(
                f"  {clients} clients: {level['requests']} requests, {level['chars_per_s']:,.0f} chars/s, "
                f"p50 {level['p50_ms']:.1f} ms, p99 {level['p99_ms']:.1f} ms, {level['errors']} errors",
                file=sys.stderr,
            )
        peak_mb = peak_memory_mb(server.pid)
        metrics = http_get(port, "/metrics")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    after = offline(model, texts_path, args)
    print(f"{model}: offline again {after['chars_per_s']:,.0f} chars/s", file=sys.stderr)
    batches = [line for line in metrics.splitlines() if line.startswith("spacy_cner_batch_texts_")]
    count = float(next(line for line in batches if line.startswith("spacy_cner_batch_texts_count")).split()[1])
    total = float(next(line for line in batches if line.startswith("spacy_cner_batch_texts_sum")).split()[1])
    return {
        "offline_chars_per_s": [before["chars_per_s"], after["chars_per_s"]],
        "levels": levels,
        "server_peak_mb": peak_mb,
        "mean_batch_texts": total / count if count else None,
    }


async def load(port: int, texts: List[str], clients: int, seconds: float, max_requests: int) -> dict:
    """clients keep-alive connections, each sending one text a request until the time or request budget ends."""
    deadline = time.perf_counter() + seconds
    budget = [max_requests]
    latencies: List[float] = []
    counts = {"chars": 0, "errors": 0}
    errors: Dict[str, int] = {}

    async def client(index: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        at = index
        try:
            while time.perf_counter() < deadline and budget[0] > 0:
                budget[0] -= 1
                text = texts[at % len(texts)]
                at += clients
                body = json.dumps({"text": text}, ensure_ascii=False).encode("utf8")
                head = (
                    f"POST /v1/entities HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                ).encode("ascii")
                start = time.perf_counter()
                writer.write(head + body)
                status, answer = await read_response(reader)
                latencies.append(time.perf_counter() - start)
                if status != 200 or json.loads(answer).get("text") != text:
                    counts["errors"] += 1
                    key = f"{status}: {answer[:100]!r}"
                    errors[key] = errors.get(key, 0) + 1
                else:
                    counts["chars"] += len(text)
        except (OSError, asyncio.IncompleteReadError) as err:
            counts["errors"] += 1
            errors[type(err).__name__] = errors.get(type(err).__name__, 0) + 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(index) for index in range(clients)))
    wall = time.perf_counter() - start
    latencies.sort()
    return {
        "requests": len(latencies),
        "seconds": wall,
        "chars_per_s": counts["chars"] / wall,
        "requests_per_s": len(latencies) / wall,
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "errors": counts["errors"],
        "error_kinds": errors,
    }


async def read_response(reader: asyncio.StreamReader):
    """(status, body) of one HTTP/1.1 answer with a Content-Length (uvicorn's JSON answers)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:"))
    return status, await reader.readexactly(length)


def percentile(values: List[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_get(port: int, path: str) -> str:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.read().decode("utf8") if response.status == 200 else ""
    finally:
        connection.close()


def wait_ready(port: int, server: subprocess.Popen, timeout: float) -> None:
    import http.client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"The server exited ({server.returncode}): see bench/runs/serve/serve.log")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"The server was not ready after {timeout:g} s")


def peak_memory_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def render(results: dict, args: argparse.Namespace, texts: List[str]) -> Section:
    rows = []
    for model, result in results.items():
        offline_rate = statistics.mean(result["offline_chars_per_s"])
        for clients, level in result["levels"].items():
            rows.append(
                {
                    "model": Path(model).parent.name,
                    "clients": clients,
                    "requests": level["requests"],
                    "served chars/s": round(level["chars_per_s"]),
                    "offline chars/s": round(offline_rate),
                    "served / offline": round(level["chars_per_s"] / offline_rate, 2),
                    "p50 ms": round(level["p50_ms"], 1),
                    "p99 ms": round(level["p99_ms"], 1),
                    "errors": level["errors"],
                    "server peak MB": round(result["server_peak_mb"]),
                }
            )
    notes = (
        f"{len(texts)} single sentences of Resume ({args.min_chars}-{args.max_chars} characters, "
        f"{statistics.mean(map(len, texts)):.1f} on average), one a request; each client count's run bounded by "
        f"{args.seconds:g} s and {args.requests} requests. Server: --threads 1 --max-batch {args.max_batch} "
        f"--max-wait-ms {args.max_wait_ms:g}, one worker; the clients run in the benchmark's process on the same "
        "cores. Offline: nlp.pipe(batch_size=--max-batch) on one thread, the mean of a run before and after the "
        "server's (best of --offline-repeats passes each). Mean texts per batch over all of a model's runs: "
        + ", ".join(f"{Path(m).parent.name} {r['mean_batch_texts']:.1f}" for m, r in results.items())
        + "."
    )
    return Section("Serving under load (bench/bench_serve.py)", notes, [rows])


if __name__ == "__main__":
    main()
