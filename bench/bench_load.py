"""Load time and size of a pipeline: `spacy.load` + its first doc, in fresh processes, and its files.

Usage: python bench/bench_load.py MODEL [--repeats 5] [--result NAME]

MODEL is loaded once, saved again by this checkout (the pipeline's files as this version writes them)
with crf_ner's save_weights "float32", "float16" and "int8-tables", and each copy is timed in --repeats
fresh processes on one thread,
spacy and spacy_cner imported first (their import is the interpreter's, not the pipeline's),
then `spacy.load` of the copy and its first doc: `nlp("张三在北京市工作。")`, and in other processes
`nlp(JOINED)`, a text with runs of letters and digits joined by "-" and "." (the soft-word feature
segmented those with jieba itself, whose dictionary took about a second to load, until 2026-11-27). The
median of each is reported ("load + first doc": with the slower of the two first docs), with the
pipeline's size on disk and its largest files.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import Section, add_result_argument, publish

CHILD = """
import json, sys, time
import spacy, spacy_cner
start = time.perf_counter()
nlp = spacy.load(sys.argv[1])
loaded = time.perf_counter()
nlp(sys.argv[2])
done = time.perf_counter()
print(json.dumps({"load": loaded - start, "first_doc": done - loaded}))
"""
PLAIN = "张三在北京市工作。"
JOINED = "型号kfr-35gw的空调，价格12.5元。"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    add_result_argument(parser, "load")
    args = parser.parse_args()
    import spacy

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        resaved, half, tables8 = Path(tmp) / "resaved", Path(tmp) / "float16", Path(tmp) / "int8-tables"
        nlp = spacy.load(args.model)
        for setting, path in (("float32", resaved), ("float16", half), ("int8-tables", tables8)):
            nlp.get_pipe("crf_ner").save_weights = setting
            nlp.to_disk(path)
        for name, path in (
            ("saved again by this checkout", resaved),
            ("saved again, save_weights float16", half),
            ("saved again, save_weights int8-tables", tables8),
        ):
            times = [_time(path, PLAIN) for _ in range(args.repeats)]
            joined = [_time(path, JOINED) for _ in range(args.repeats)]
            files = sorted(
                ((p.stat().st_size, p.relative_to(path).as_posix()) for p in path.rglob("*") if p.is_file()),
                reverse=True,
            )
            rows.append(
                {
                    "name": name,
                    "load": statistics.median(t["load"] for t in times),
                    "first_doc": statistics.median(t["first_doc"] for t in times),
                    "first_doc_joined": statistics.median(t["first_doc"] for t in joined),
                    "total": statistics.median(t["load"] for t in times + joined)
                    + max(
                        statistics.median(t["first_doc"] for t in times),
                        statistics.median(t["first_doc"] for t in joined),
                    ),
                    "mb": sum(size for size, _ in files) / 1e6,
                    "largest": ", ".join(f"{rel} {size / 1e6:.1f} MB" for size, rel in files[:2]),
                }
            )
    section = render(rows, args.repeats)
    publish(args.result, {"rows": rows, "repeats": args.repeats, "model": args.model}, section)


def render(rows: list, repeats: int) -> Section:
    """One row per pipeline: its load, first docs, their sum, its size on disk and largest files."""
    result = [
        {
            "pipeline files": r["name"],
            "spacy.load s": round(r["load"], 2),
            "first doc s": round(r["first_doc"], 2),
            f"first doc: {JOINED} s": round(r["first_doc_joined"], 2),
            "load + first doc s": round(r["total"], 2),
            "on disk MB": round(r["mb"], 1),
            "largest files": r["largest"],
        }
        for r in rows
    ]
    return Section(
        "Load time and size",
        f"Median of {repeats} fresh processes, one thread; spacy and spacy_cner imported before the clock starts.",
        [result],
    )


def _time(path: Path, text: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), text], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
