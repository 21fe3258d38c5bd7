"""`annotate` throughput: local nlp.pipe (n_process 1, 2) and Ray Data (1, 2 workers) on the same corpus.

Usage: python bench/bench_annotate.py [--model PATH] [--mb 50] [--data ../shared/data]
       [--shards 8] [--out bench/runs/annotate] [--setups local1 local2 ray1 ray2] [--result NAME]

The corpus is the train sentences of every dataset in ../shared/data, repeated in order until it
holds --mb megabytes of UTF-8 text, one doc per line, in --shards text files. Each setup runs
`python -m spacy_cner annotate` (the select-* setups: `select -n 1000`, which scores every text and
writes the top 1,000) in its own process on an empty output folder: wall time (Ray's start
included), docs/s and chars/s, the peak resident memory of each worker process (nlp.pipe's
children, or Ray's annotator actors; the driver for n_process 1), and the speed-up over local1.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import ROOT, Section, add_data_argument, add_out_argument, add_result_argument, publish

SETUPS = {
    "local1": ["--engine", "local", "--n-process", "1"],
    "local2": ["--engine", "local", "--n-process", "2"],
    "ray1": ["--engine", "ray", "--workers", "1"],
    "ray2": ["--engine", "ray", "--workers", "2"],
    # `select` ranks the same corpus (issue 37's target: at least half of annotate's chars/s).
    "select-entropy": ["select", "--strategy", "entropy"],
    "select-expected-count": ["select", "--strategy", "expected-count"],
    "select-entropy2": ["select", "--strategy", "entropy", "--n-process", "2"],
}
# How many texts the select setups write.
SELECT_N = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        type=Path,
        default=ROOT / "bench" / "runs" / "datasets" / "resume" / "default" / "seed0" / "model-best",
    )
    add_data_argument(parser)
    parser.add_argument("--mb", type=float, default=50.0, help="corpus size in megabytes of UTF-8 text")
    parser.add_argument("--shards", type=int, default=8, help="input files (Ray reads files in parallel)")
    add_out_argument(parser, "annotate")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    add_result_argument(parser, "annotate")
    args = parser.parse_args()
    if not args.model.exists():
        sys.exit(
            f"No model at {args.model}: train one (bench/bench_datasets.py or `spacy project run all`) or pass --model"
        )
    corpus, n_docs, n_chars = write_corpus(args.data, args.out / "corpus", args.mb, args.shards)
    print(f"corpus: {n_docs:,} docs, {n_chars:,} characters in {args.shards} files at {corpus}", flush=True)
    results = {}
    for setup in args.setups:
        results[setup] = run_setup(args.model, corpus, args.out / setup, SETUPS[setup], n_chars)
        print(setup, json.dumps(results[setup]), flush=True)
        if results[setup]["docs"] != n_docs:
            sys.exit(f"{setup} annotated {results[setup]['docs']} docs of {n_docs}")
    figures = {"setups": results, "docs": n_docs, "chars": n_chars, "mb": args.mb, "model": args.model}
    publish(args.result, figures, render(results, args, n_docs, n_chars))


def write_corpus(data: Path, folder: Path, megabytes: float, n_shards: int):
    """The datasets' train sentences, repeated to `megabytes`, in n_shards text files."""
    sentences = []
    for path in sorted(data.glob("*/train*")):
        chars = []
        for line in path.read_text(encoding="utf8").splitlines():
            line = line.strip()
            if not line:
                if chars:
                    sentences.append("".join(chars))
                chars = []
            else:
                chars.append(line.split()[0] if line.split() else " ")
        if chars:
            sentences.append("".join(chars))
    if not sentences:
        sys.exit(f"No train files under {data}: pass --data DIR")
    target = int(megabytes * 1_000_000)
    docs, size, i = [], 0, 0
    while size < target:
        docs.append(sentences[i % len(sentences)])
        size += len(docs[-1].encode("utf8")) + 1
        i += 1
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    per_shard = -(-len(docs) // n_shards)
    for shard in range(n_shards):
        part = docs[shard * per_shard : (shard + 1) * per_shard]
        (folder / f"part{shard:02d}.txt").write_text("".join(doc + "\n" for doc in part), encoding="utf8")
    return folder, len(docs), sum(len(doc) for doc in docs)


def run_setup(model: Path, corpus: Path, out: Path, options: list, corpus_chars: int) -> dict:
    """One `annotate` (or `select`) run in its own process, its workers' peak memory sampled from /proc."""
    if out.exists():
        shutil.rmtree(out)
    if options[0] == "select":
        out.mkdir(parents=True)
        command = [
            sys.executable,
            "-m",
            "spacy_cner",
            "select",
            str(model),
            str(corpus),
            "-n",
            str(SELECT_N),
            "-o",
            str(out / "next.jsonl"),
            "--quiet",
            *options[1:],
        ]
    else:
        command = [
            sys.executable,
            "-m",
            "spacy_cner",
            "annotate",
            str(model),
            str(corpus),
            str(out),
            "--quiet",
            *options,
        ]
    env = {**os.environ, "RAY_worker_niceness": "0"}  # Ray's workers otherwise run at niceness 15
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks: dict = {}
    done = threading.Event()
    sampler = threading.Thread(target=sample_peaks, args=(process.pid, "ray" in options, peaks, done))
    sampler.start()
    output, _ = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    if options[0] == "select":  # "1000 of N texts selected": every text was scored
        n_docs, n_chars = int(re.search(r"of ([0-9]+) texts selected", output).group(1)), corpus_chars
    else:
        n_docs = sum(1 for path in out.glob("*.jsonl") for _ in path.open(encoding="utf8"))
        n_chars = sum(
            sum(len(json.loads(line)["text"]) for line in path.open(encoding="utf8")) for path in out.glob("*.jsonl")
        )
    workers = {pid: peak for pid, (peak, role) in peaks.items() if role == "worker"}
    if not workers:  # n_process 1: the annotating process is the driver itself
        workers = {pid: peak for pid, (peak, role) in peaks.items() if role == "driver"}
    return {
        "seconds": seconds,
        "docs": n_docs,
        "chars": n_chars,
        "chars_per_s": n_chars / seconds,
        "docs_per_s": n_docs / seconds,
        "worker_peak_mb": max(workers.values()) / 1024 if workers else None,
        "n_workers": len(workers),
    }


def sample_peaks(driver: int, ray: bool, peaks: dict, done: threading.Event) -> None:
    """Peak resident memory (VmHWM, kB) of the driver, its descendants and Ray's annotator actors."""
    while not done.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            pid = int(entry.name)
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if "VmHWM" not in fields:
                continue
            if pid == driver:
                role = "driver"
            elif ray:  # Ray also starts its own services under the driver: count the actors only
                role = "worker" if b"RayAnnotator" in cmdline else None
            else:  # nlp.pipe's workers are the driver's Python children (multiprocessing)
                role = "worker" if int(fields["PPid"]) == driver else None
            if role:
                peak = int(fields["VmHWM"].split()[0])
                peaks[pid] = (max(peak, peaks.get(pid, (0, role))[0]), role)
        time.sleep(0.5)


def render(results: dict, args: argparse.Namespace, n_docs: int, n_chars: int) -> Section:
    base = results.get("local1", {}).get("chars_per_s")
    notes = (
        f"Corpus: {n_docs:,} docs, {n_chars:,} characters ({args.mb:g} MB of UTF-8) in {args.shards} text "
        f"files; model {args.model.relative_to(ROOT) if args.model.is_relative_to(ROOT) else args.model}. "
        "Wall time includes loading the pipeline (and starting Ray); peak memory is the largest resident set "
        "of one worker process."
    )
    rows = [
        {
            "setup": setup,
            "wall s": round(r["seconds"], 1),
            "docs/s": round(r["docs_per_s"]),
            "chars/s": round(r["chars_per_s"]),
            "peak MB per worker": round(r["worker_peak_mb"]) if r["worker_peak_mb"] else None,
            "workers": r["n_workers"],
            "vs local1 (x)": round(r["chars_per_s"] / base, 2) if base else None,
        }
        for setup, r in results.items()
    ]
    return Section("annotate: local and Ray", notes, [rows])


if __name__ == "__main__":
    main()
