"""Inference speed of today's default against the default of an earlier commit, each with its own code.

Usage: python bench/bench_speed_then.py --runs RUNS --then-runs THEN_RUNS --then-python PYTHON
       [--then-label a260add] [--rounds 3] [--datasets resume ...] [--result NAME]

Issue 33 asks that the default's chars/s be no lower than the default of the day it was filed, on
the same texts. bench_speed.py compares configs with today's code only (which made both faster);
this compares what a user had then with what they have now: RUNS/<dataset>/default/seed0/model-best
loaded by this interpreter (today's code), against THEN_RUNS/<dataset>/default/seed0/model-best
loaded by --then-python, an interpreter with the earlier commit's spacy_cner installed (a separate
venv: the two versions' entry points differ). Both read the test texts of RUNS/<dataset>/corpus.
Each round starts a fresh process per side, the sides alternating; a process times
nlp.pipe(batch_size=256) over the texts three times after a warm-up and keeps its best; the table
gives each side's best over the rounds. One thread for every library in both (OMP, MKL, OpenBLAS,
torch).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import add_result_argument, machine_line, save_result

# Run by both interpreters: only spaCy's API, which both versions share.
MEASURE = """
import json, sys, time
import torch
torch.set_num_threads(1)
import spacy
model, texts_file = sys.argv[1], sys.argv[2]
texts = json.load(open(texts_file, encoding="utf8"))
nlp = spacy.load(model)
list(nlp.pipe(texts[:64], batch_size=256))
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    docs = list(nlp.pipe(texts, batch_size=256))
    best = min(best, time.perf_counter() - start)
print(json.dumps({"seconds": best, "entities": sum(len(doc.ents) for doc in docs)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="bench_datasets.py --out folder of today's default")
    parser.add_argument("--then-runs", type=Path, required=True, help="the same of the earlier default")
    parser.add_argument("--then-python", type=Path, required=True, help="an interpreter with the earlier code")
    parser.add_argument("--then-label", default="then", help="what to call the earlier default in the table")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", help="only these (default: every dataset with both models)")
    add_result_argument(parser, "speed_then")
    args = parser.parse_args()
    rows = []
    for dataset in sorted(p.name for p in args.runs.iterdir() if model_of(p).exists()):
        if args.datasets and dataset not in args.datasets:
            continue
        if not model_of(args.then_runs / dataset).exists():
            print(f"{dataset}: no model in {args.then_runs / dataset}, skipped", file=sys.stderr)
            continue
        rows.append(measure(dataset, args))
        print(rows[-1], file=sys.stderr)
    if not rows:
        sys.exit(f"No dataset with a default seed-0 model in both {args.runs} and {args.then_runs}")
    table = render(rows, args.then_label)
    print(table)
    save_result(args.result, {"then": args.then_label, "rows": rows}, table)


def model_of(dataset: Path) -> Path:
    return dataset / "default" / "seed0" / "model-best"


def measure(dataset: str, args) -> dict:
    import spacy
    from spacy.tokens import DocBin

    test = DocBin().from_disk(args.runs / dataset / "corpus" / "test.spacy")
    texts = [doc.text for doc in test.get_docs(spacy.blank("zh").vocab)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # each interpreter imports its own installed spacy_cner
    sides = {"now": (sys.executable, model_of(args.runs / dataset)),
             "then": (str(args.then_python), model_of(args.then_runs / dataset))}
    results = {side: [] for side in sides}
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf8", delete=False) as handle:
        json.dump(texts, handle, ensure_ascii=False)
    try:
        for _ in range(args.rounds):
            for side, (python, model) in sides.items():
                out = subprocess.run([python, "-c", MEASURE, str(model), handle.name], env=env, check=True,
                                     capture_output=True, text=True, cwd=tempfile.gettempdir())
                results[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        os.unlink(handle.name)
    chars = sum(len(text) for text in texts)
    speed = {side: chars / min(r["seconds"] for r in runs) for side, runs in results.items()}
    entities = {side: runs[0]["entities"] for side, runs in results.items()}
    return {"dataset": dataset, "texts": len(texts), "chars": chars, "chars_per_s": speed,
            "ratio": speed["now"] / speed["then"], "entities": entities}


def render(rows, then_label: str) -> str:
    lines = [f"### Inference: today's default against the default of {then_label} (one thread)", "",
             f"Machine: {machine_line()}  ", "",
             f"| dataset | texts | chars | default today chars/s | default of {then_label} chars/s | today / then |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        speed = row["chars_per_s"]
        lines.append(f"| {row['dataset']} | {row['texts']:,} | {row['chars']:,} | {speed['now']:,.0f} | "
                     f"{speed['then']:,.0f} | {row['ratio']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
