"""Inference with and without the row-by-row products split among torch's threads, in one process.

Usage: python bench/bench_row_split.py --runs bench/runs/speed [--repeats 5] [--result NAME]

For each RUNS/<dataset> with a corpus and our default's seed-0 model (as bench_speed.py reads
them): nlp.pipe(batch_size=256) over the test texts with the libraries' default threads, the split
on (backends.rowwise_ops.ROWS_PER_THREAD 256) and off (10^9) alternating, best of --repeats each. Both
settings give the same entities (each row is its own product); only the time differs.
"""
import argparse
import datetime
import shlex
import sys
import time
from pathlib import Path

from _common import add_result_argument, machine_line, save_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="a bench_datasets.py --out folder")
    parser.add_argument("--repeats", type=int, default=5)
    add_result_argument(parser, "row_split")
    args = parser.parse_args()
    import spacy
    import torch
    from spacy.tokens import DocBin

    from spacy_cner.backends import rowwise_ops

    print(f"torch threads: {torch.get_num_threads()}")
    rows = []
    for dataset in sorted(p for p in args.runs.iterdir() if (p / "default" / "seed0" / "model-best").exists()):
        nlp = spacy.load(dataset / "default" / "seed0" / "model-best")
        texts = [doc.text for doc in DocBin().from_disk(dataset / "corpus" / "test.spacy").get_docs(nlp.vocab)]
        n_chars = sum(len(text) for text in texts)
        list(nlp.pipe(texts[:256], batch_size=256))  # warm up (jieba's dictionary, lazy tables)
        best = {"off": 0.0, "on": 0.0}
        for _ in range(args.repeats):
            for setting, rows_per_thread in (("on", 256), ("off", 10**9)):
                rowwise_ops.ROWS_PER_THREAD = rows_per_thread
                start = time.perf_counter()
                for _ in nlp.pipe(texts, batch_size=256):
                    pass
                best[setting] = max(best[setting], n_chars / (time.perf_counter() - start))
        rows.append({"dataset": dataset.name, "chars_per_s": best})
        print(rows[-1], file=sys.stderr)
    lines = [
        f"### Row-by-row products split among torch's threads ({datetime.date.today().isoformat()})",
        "",
        f"Command: `python bench/bench_row_split.py {shlex.join(sys.argv[1:])}`  ",
        f"Machine: {machine_line()}  ",
        f"torch threads: {torch.get_num_threads()}; nlp.pipe(batch_size=256) over test, best of {args.repeats}, "
        "the split on and off alternating; seed-0 models.",
        "",
        "| dataset | split off, chars/s | split on, chars/s | on / off |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {row['dataset']} | {row['chars_per_s']['off']:,.0f} | {row['chars_per_s']['on']:,.0f} | "
          f"{row['chars_per_s']['on'] / row['chars_per_s']['off']:.3f} |" for row in rows),
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    save_result(args.result, {"threads": torch.get_num_threads(), "rows": rows}, table)


if __name__ == "__main__":
    main()
