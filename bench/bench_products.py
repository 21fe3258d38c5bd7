"""The tok2vec's matrix product four ways, per OpenBLAS kernel: seconds, and whether a row comes out the same alone.

Usage: python bench/bench_products.py [--rows 50000] [--coretype Haswell --coretype Sandybridge] [--result NAME]

(rows x 220) @ (220 x 384), the default's Maxout, on one thread, each kernel in a process of its own
(OPENBLAS_CORETYPE; a kernel the CPU lacks crashes its process, which the table says): blis (thinc's
default ops), 256-row blocks (RowBlockOps, which spacy_cner used before RowwiseOps; written out here),
RowwiseOps, and one numpy product. "Same alone": rows 5-6, 40-42, 300-306, 1001-1017 and 3-302 of the
whole product equal the product of those rows alone, as a copy and as a view. Best of 3.
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from _common import add_result_argument, machine_line, save_result

CHILD = """
import json, time
import numpy
from thinc.api import NumpyOps
from spacy_cner.layers._blas import RowwiseOps

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
    "one row at a time, aligned (RowwiseOps)": lambda x: rowwise.gemm(x, W, trans2=True),
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
print(json.dumps(results))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50000)
    parser.add_argument("--coretype", action="append", default=[], help="OPENBLAS_CORETYPE values (default: Haswell, Sandybridge)")
    add_result_argument(parser, "products")
    args = parser.parse_args()
    coretypes = args.coretype or ["Haswell", "Sandybridge"]
    results = {}
    for coretype in coretypes:
        env = {**os.environ, "OPENBLAS_CORETYPE": coretype, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", CHILD, str(args.rows)], env=env, capture_output=True, text=True)
        results[coretype] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    names = next((list(r) for r in results.values() if r), [])
    header = " | ".join(f"{c}: seconds | same alone?" for c in coretypes)
    lines = [
        f"### Matrix products, per OpenBLAS kernel ({datetime.date.today().isoformat()})",
        "",
        f"Command: `{shlex.join(['python', 'bench/bench_products.py', *sys.argv[1:]])}`  ",
        f"Machine: {machine_line()}  ",
        f"({args.rows:,} x 220) @ (220 x 384) on one thread, best of 3.",
        "",
        f"| product | {header} |",
        "| --- |" + " ---: | --- |" * len(coretypes),
    ]
    for name in names:
        cells = []
        for coretype in coretypes:
            result = results[coretype]
            cells.append("crashed | -" if result is None else
                         f"{result[name]['seconds']:.3f} | {'yes' if result[name]['same'] else '**no**'}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    save_result(args.result, {"rows": args.rows, "kernels": results}, table)


if __name__ == "__main__":
    main()
