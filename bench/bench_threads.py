"""torch's thread count against the machine's load: chars/s of trained pipelines predicting on one thread (the
components' torch_threads default) and on torch's default (one per core: the components' torch_threads set to
None, as every pipeline ran before the setting), on the machine as it is and beside --load processes that keep
cores busy (as other jobs on a shared machine do), side by side in one run.

    python bench/bench_threads.py --model default=RUNS/model-best --model zh_lac=RUNS/zh_lac
        --corpus RUNS/resume/corpus/test.spacy [--texts 300] [--load 2] [--rounds 2] [--result NAME]

Each (model, threads, load) runs in a new process: nlp(text) over the first --texts texts one at a time, then
nlp.pipe over all of them (batch_size 64), best of --rounds, the settings alternating within a round. The load
is --load processes in their own session (so that Linux's per-session scheduling shares the cores between them
and the benchmark as it would between two users' jobs), each a Python loop that never sleeps, stopped after
each measurement. The environment's OMP_NUM_THREADS is removed from the children, so torch's default is one
thread per core there and numpy's BLAS is the same in every setting.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Section, add_result_argument, cpu_count, publish  # noqa: E402

CHILD = r"""
import json, sys, time
import torch
own, model, corpus, n_texts = sys.argv[1] == "own", sys.argv[2], sys.argv[3], int(sys.argv[4])
import spacy
from spacy.tokens import DocBin
nlp = spacy.load(model)
pipes = [pipe for _, pipe in nlp.pipeline if hasattr(pipe, "torch_threads")]
if not own:  # torch's default while they predict
    for pipe in pipes:
        pipe.torch_threads = None
threads = sorted({pipe.torch_threads or torch.get_num_threads() for pipe in pipes})
texts = [doc.text for doc in DocBin().from_disk(corpus).get_docs(nlp.vocab) if doc.text.strip()]
for text in texts[:5]:
    nlp(text)
list(nlp.pipe(texts[:64]))
alone = texts[:n_texts]
start = time.perf_counter()
for text in alone:
    nlp(text)
one = time.perf_counter() - start
start = time.perf_counter()
list(nlp.pipe(texts, batch_size=64))
pipe = time.perf_counter() - start
print(json.dumps({"threads": threads, "one": sum(map(len, alone)) / one,
                  "pipe": sum(map(len, texts)) / pipe}))
"""

SPIN = "while True:\n    pass\n"


def measure(model: str, corpus: Path, own: bool, n_texts: int, load: int) -> dict:
    """One child's chars/s beside `load` spinning processes (started before it, stopped after it)."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True, stdout=subprocess.DEVNULL)
        for _ in range(load)
    ]
    try:
        time.sleep(0.5 if load else 0.0)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, "own" if own else "torch", model, str(corpus), str(n_texts)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
        )
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    if done.returncode != 0:
        sys.exit(f"The child for {model} ({'own' if own else 'torch'} threads) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="NAME=PATH, repeatable")
    parser.add_argument("--corpus", type=Path, required=True, help="a .spacy file whose texts are tagged")
    parser.add_argument("--texts", type=int, default=300, help="texts tagged one at a time")
    parser.add_argument("--load", type=int, default=cpu_count(), help="busy processes in the loaded setting")
    parser.add_argument("--rounds", type=int, default=2)
    add_result_argument(parser, "threads_under_load")
    args = parser.parse_args()
    models = dict(item.split("=", 1) for item in args.model)
    cores = cpu_count()
    settings = [(name, own, load) for name in models for load in (0, args.load) for own in (True, False)]
    best: dict = {}
    for _ in range(args.rounds):
        for name, own, load in settings:
            result = measure(models[name], args.corpus, own, args.texts, load)
            previous = best.get((name, own, load), {"one": 0.0, "pipe": 0.0})
            best[name, own, load] = {mode: max(previous[mode], result[mode]) for mode in ("one", "pipe")}
            best[name, own, load]["threads"] = result["threads"]
    rows = []
    for name, own, load in settings:
        speed, single = best[name, own, load], best[name, True, load]
        rows.append(
            {
                "model": name,
                "busy processes beside it": load,
                "threads while predicting": "the components' (torch_threads)" if own else "torch's default",
                "torch threads": speed["threads"],
                "one text at a time chars/s": round(speed["one"]),
                "nlp.pipe chars/s": round(speed["pipe"]),
                "x the components' (one at a time / nlp.pipe)": [
                    round(speed["one"] / single["one"], 2),
                    round(speed["pipe"] / single["pipe"], 2),
                ],
            }
        )
    notes = (
        f"{args.texts} texts one at a time, then all of {args.corpus.name}'s through nlp.pipe (batch_size 64); "
        f"best of {args.rounds} rounds; the components' torch_threads as the pipeline has them, or set to None so "
        f"that torch's default applies ({cores} here, one per core); the loaded setting beside {args.load} "
        "processes that never sleep, in their own session. Models: "
        + ", ".join(f"{name} ({path})" for name, path in models.items())
        + "."
    )
    publish(
        args.result,
        {"best": {f"{n}/{'own' if own else 'torch'}/{load}": v for (n, own, load), v in best.items()}},
        Section("torch's threads on a free and on a loaded machine", notes, [rows]),
    )


if __name__ == "__main__":
    main()
