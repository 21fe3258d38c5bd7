"""Peak memory of one 1,000,000-character doc, each measurement in its own process, side by side with the code
of another commit (a git worktree) on the same model and text.

Usage: python bench/bench_long_doc_memory.py --model MODEL [--before WORKTREE] [--data ../shared/data/resume]
       [--chars 1000000] [--result NAME]

The doc is Resume's dev and test sentences joined and repeated to --chars characters; nlp(doc) on one thread;
the peak RSS of the process (the model loaded, the doc built and tagged), the seconds and the entities found.
--before runs the same with PYTHONPATH set to a worktree of an earlier commit (the same entities are expected).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import ROOT, Section, add_data_argument, add_out_argument, add_result_argument, convert, publish

CHILD = r"""
import json, resource, sys, time
import spacy
from spacy.tokens import DocBin
nlp = spacy.load(sys.argv[1])
texts = [d.text for p in sys.argv[2:4] for d in DocBin().from_disk(p).get_docs(nlp.vocab)]
joined = "".join(texts)
chars = int(sys.argv[4])
text = (joined * (chars // len(joined) + 1))[:chars]
start = time.perf_counter()
doc = nlp(text)
print(json.dumps({"seconds": time.perf_counter() - start, "entities": len(doc.ents),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--before", type=Path, default=None, help="a worktree of the code to compare with")
    add_data_argument(parser, "resume")
    add_out_argument(parser, "long_doc_memory")
    parser.add_argument("--chars", type=int, default=1_000_000)
    add_result_argument(parser, "long_doc_memory")
    args = parser.parse_args()
    folder = convert(args.data, args.out / "corpus")
    corpus = [folder / "dev.spacy", folder / "test.spacy"]
    runs = {}
    for name, code in (("before", args.before), ("now", ROOT)):
        if code is None:
            continue
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.model), *map(str, corpus), str(args.chars)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
        )
        runs[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(name, runs[name], file=sys.stderr)
    section = Section(
        f"One {args.chars:,}-character doc: peak memory",
        "",
        [
            [
                {
                    "code": name,
                    "peak RSS MB": round(run["peak_mb"]),
                    "seconds": round(run["seconds"], 1),
                    "entities": run["entities"],
                }
                for name, run in runs.items()
            ]
        ],
    )
    publish(args.result, {"model": str(args.model), "chars": args.chars, "runs": runs}, section)


if __name__ == "__main__":
    main()
