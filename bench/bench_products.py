"""The tok2vec's matrix product five ways, per OpenBLAS kernel: seconds, and whether a row comes out the same alone.

Usage: python bench/bench_products.py [--rows 50000] [--coretype Haswell --coretype Sandybridge]
       [--models MODEL ...] [--result NAME]

(rows x 220) @ (220 x 384), the default's Maxout, on one thread, each kernel in a process of its own
(OPENBLAS_CORETYPE; a kernel the CPU lacks crashes its process, which the table says): blis (thinc's
default ops), 256-row blocks on numpy (RowBlockOps, which spacy_cner used before RowwiseOps; written out
here), one row at a time (RowwiseOps until 2026-11-27, its fallback now), RowwiseOps (fixed blocks on
torch where _blocks_are_invariant holds), and one numpy product. "Same alone": rows 5-6, 40-42,
300-306, 1001-1017 and 3-302 of the whole product equal the product of those rows alone, as a copy
and as a view. Best of 3.

--models: trained pipelines (OUT/DATASET/SYSTEM/seedN/model-best of bench_datasets.py), each scored on
OUT/DATASET/corpus/test.spacy with RowwiseOps' fixed blocks and with every product row by row (the two
round differently): test F1 of each and the share of test docs with the same entities. One thread.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import Section, add_result_argument, publish, run_child, single_thread, trained_model

CHILD = """
import json, time
import numpy
from thinc.api import NumpyOps
from spacy_cner.backends.rowwise_ops import RowwiseOps, _blocks_are_invariant, _rowwise_product

rows = int(__import__("sys").argv[1])
rng = numpy.random.default_rng(0)
X = rng.standard_normal((rows, 220)).astype("f")
W = rng.standard_normal((384, 220)).astype("f")


def blocks(x):
    out = numpy.empty((len(x), 384), dtype="f")
    whole = len(x) - len(x) % 256
    for start in range(0, whole, 256):
        out[start : start + 256] = x[start : start + 256] @ W.T
    if whole < len(x):
        block = numpy.zeros((256, 220), dtype="f")
        block[: len(x) - whole] = x[whole:]
        out[whole:] = (block @ W.T)[: len(x) - whole]
    return out


blis, rowwise = NumpyOps(use_blis=True), RowwiseOps()
products = {
    "blis (thinc's default)": lambda x: blis.gemm(x, W, trans2=True),
    "256-row blocks (before)": blocks,
    "one row at a time, aligned (RowwiseOps before, its fallback)": lambda x: _rowwise_product(x, W.T),
    "fixed blocks on torch (RowwiseOps)": lambda x: rowwise.gemm(x, W, trans2=True),
    "one numpy product": lambda x: x @ W.T,
}
parts = [(5, 2), (40, 3), (300, 7), (1001, 17), (3, 300)]
results = {}
for name, product in products.items():
    whole = product(X)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        product(X)
        times.append(time.perf_counter() - start)
    same = all(numpy.array_equal(product(part), whole[s : s + n])
               for s, n in parts for part in (X[s : s + n].copy(), X[s : s + n]))
    results[name] = {"seconds": min(times), "same": same}
results["blocks checked invariant"] = _blocks_are_invariant(220, 384, X.dtype)
print(json.dumps(results))
"""
# Scores a model's test split with RowwiseOps' fixed blocks, then with every product row by row.
MODEL_CHILD = """
import json, sys
import torch
torch.set_num_threads(1)
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy_cner.backends import rowwise_ops

nlp = spacy.load(sys.argv[1])
docs = list(DocBin().from_disk(sys.argv[2]).get_docs(nlp.vocab))
result = {"f": {}, "entities": {}}
for mode in ("blocks", "row by row"):
    if mode == "row by row":
        rowwise_ops._blocks_are_invariant = lambda *shape: False
    predicted = list(nlp.pipe([d.text for d in docs], batch_size=256))
    result["f"][mode] = nlp.evaluate([Example(p, d) for p, d in zip(predicted, docs)])["ents_f"]
    result["entities"][mode] = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in predicted]
same = sum(a == b for a, b in zip(*result.pop("entities").values()))
result["same_docs"] = same / max(1, len(docs))
print("RESULT " + json.dumps(result))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50000)
    parser.add_argument(
        "--coretype", action="append", default=[], help="OPENBLAS_CORETYPE values (default: Haswell, Sandybridge)"
    )
    parser.add_argument("--models", nargs="*", type=Path, default=[], help="trained pipelines to score both ways")
    add_result_argument(parser, "products")
    args = parser.parse_args()
    coretypes = args.coretype or ["Haswell", "Sandybridge"]
    results = {}
    for coretype in coretypes:
        env = {**os.environ, "OPENBLAS_CORETYPE": coretype, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", CHILD, str(args.rows)], env=env, capture_output=True, text=True)
        results[coretype] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    names = next(([name for name in r if name != "blocks checked invariant"] for r in results.values() if r), [])
    notes = (
        f"({args.rows:,} x 220) @ (220 x 384) on one thread, best of 3; empty: the kernel crashed. RowwiseOps' "
        "blocks checked invariant (else it multiplies row by row): "
        + ", ".join(f"{c} {'yes' if r and r['blocks checked invariant'] else 'no'}" for c, r in results.items())
        + "."
    )
    kernels = []
    for name in names:
        row = {"product": name}
        for coretype in coretypes:
            result = results[coretype]
            row[f"{coretype}: seconds"] = None if result is None else round(result[name]["seconds"], 3)
            row[f"{coretype}: same alone?"] = None if result is None else result[name]["same"]
        kernels.append(row)
    models = [score_model(model) for model in args.models]
    trained = []
    if models:
        notes += (
            " Second table: trained pipelines (test split, one thread), per dataset the mean over its models: "
            "RowwiseOps' fixed blocks against every product row by row."
        )
        for dataset in dict.fromkeys(row["dataset"] for row in models):
            group = [row for row in models if row["dataset"] == dataset]
            mean = lambda mode: 100 * sum(row["f"][mode] for row in group) / len(group)  # noqa: E731
            trained.append(
                {
                    "dataset": dataset,
                    "models": ", ".join(row["model"] for row in group),
                    "test F1, fixed blocks": round(mean("blocks"), 2),
                    "test F1, row by row": round(mean("row by row"), 2),
                    "largest change of a model": round(
                        max(100 * abs(row["f"]["blocks"] - row["f"]["row by row"]) for row in group), 2
                    ),
                    "test docs with the same entities (fewest) %": round(
                        100 * min(row["same_docs"] for row in group), 2
                    ),
                }
            )
    publish(
        args.result,
        {"rows": args.rows, "kernels": results, "models": models},
        Section("Matrix products, per OpenBLAS kernel", notes, [kernels, trained]),
    )


def score_model(model: Path) -> dict:
    """Test F1 with fixed blocks and row by row, and the share of docs with the same entities."""
    run = trained_model(model)
    found = run_child(MODEL_CHILD, model, run["test"], env=single_thread({**os.environ}), failure=f" on {model}")
    row = {"dataset": run["dataset"], "model": f"{run['system']} {run['seed']}", **found}
    print(row, file=sys.stderr)
    return row


if __name__ == "__main__":
    main()
