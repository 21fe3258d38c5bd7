"""Peak memory of `python -m spacy_cner distill` with one long unlabeled line (--text), each line length in its
own process: the teacher pass and the student's training together.

Usage: python bench/bench_distill_memory.py --teacher MODEL --corpus CORPUS [--student configs/student.cfg]
       [--chars 100000 1000000] [--max-steps 20] [--lac-sdist LAC-2.1.2.tar.gz] [--out DIR]
       [--note TEXT] [--result NAME]

CORPUS holds train.spacy, dev.spacy and (if there) test.spacy. The line is the train split's texts joined and
repeated to --chars characters (never dev or test texts: distill refuses those), written as OUT/line_N.txt;
distill runs on one thread into a fresh OUT/student_N (a rerun into an old one would skip the cached teacher
pass). A wrapper process runs it and reads the peak RSS of its child (resource.getrusage(RUSAGE_CHILDREN)),
so each length's peak is its own. Before the students trained on windows of a long doc (issue 85 item 3),
a 1,000,000-character line took 9.79 GB and then failed ("can't allocate memory"), a 100,000-character one
1.65 GB.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

from spacy.tokens import DocBin

from _common import ROOT, Section, add_out_argument, add_result_argument, publish, run_child, single_thread

# Runs the distill command given as its arguments and answers its exit status, seconds, peak RSS (the
# largest of its children's: the distill process, the teacher pass in it with --n-process 1) and log tail.
CHILD = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
seconds = time.perf_counter() - start
print("RESULT " + json.dumps({"returncode": done.returncode, "seconds": seconds,
                              "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                              "log_tail": done.stdout[-2000:]}))
"""


def long_line(train: Path, chars: int) -> str:
    """The train split's texts joined (line breaks as spaces) and repeated to chars characters."""
    import spacy

    vocab = spacy.blank("zh").vocab
    joined = "".join(doc.text for doc in DocBin().from_disk(train).get_docs(vocab)).replace("\n", " ")
    if not joined.strip():
        sys.exit(f"{train} holds no text to make the line of")
    return (joined * (chars // len(joined) + 1))[:chars]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", type=Path, required=True, help="the trained pipeline (its model-best)")
    parser.add_argument("--corpus", type=Path, required=True, help="folder of train.spacy, dev.spacy, test.spacy")
    parser.add_argument("--student", type=Path, default=ROOT / "configs" / "student.cfg")
    parser.add_argument("--chars", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--lac-sdist", type=Path, default=None, help="a local LAC-2.1.2.tar.gz (--paths.lac_sdist)")
    parser.add_argument("--note", default="", help="a note saved with the result (e.g. what else ran on the machine)")
    add_out_argument(parser, "distill_memory")
    add_result_argument(parser, "distill_long_line_memory")
    args = parser.parse_args()
    splits = {name: args.corpus / f"{name}.spacy" for name in ("train", "dev", "test")}
    for name in ("train", "dev"):
        if not splits[name].exists():
            sys.exit(f"No {splits[name]}: --corpus needs train.spacy and dev.spacy")
    args.out.mkdir(parents=True, exist_ok=True)
    env = single_thread({**os.environ})
    runs = {}
    for chars in args.chars:
        text = args.out / f"line_{chars}.txt"
        text.write_text(long_line(splits["train"], chars) + "\n", encoding="utf8")
        output = args.out / f"student_{chars}"
        shutil.rmtree(output, ignore_errors=True)
        command = [
            sys.executable,
            "-m",
            "spacy_cner",
            "distill",
            str(args.teacher),
            str(args.student),
            "--train",
            str(splits["train"]),
            "--dev",
            str(splits["dev"]),
            *(["--test", str(splits["test"])] if splits["test"].exists() else []),
            "--output",
            str(output),
            "--text",
            str(text),
            "--max-steps",
            str(args.max_steps),
            "--quiet",
            *(["--paths.lac_sdist", str(args.lac_sdist)] if args.lac_sdist else []),
        ]
        runs[chars] = run_child(CHILD, *command, env=env, failure=f" (the wrapper of {chars:,} characters)")
        run = runs[chars]
        print(
            f"{chars:,} characters: exit {run['returncode']}, {run['peak_mb']:.0f} MB, {run['seconds']:.0f} s",
            file=sys.stderr,
        )
        if run["returncode"] != 0:
            print(run["log_tail"], file=sys.stderr)
    section = Section(
        "distill with one long unlabeled line: peak memory",
        f"`python -m spacy_cner distill` of {args.teacher} into {args.student.name}, --max-steps {args.max_steps}, "
        "one thread, --text one line of the train split's texts repeated; the peak RSS of the whole run (teacher "
        "pass and student), each length in its own process.",
        [
            [
                {
                    "line characters": chars,
                    "peak RSS MB": round(run["peak_mb"]),
                    "seconds": round(run["seconds"]),
                    "finished (exit 0)": run["returncode"] == 0,
                }
                for chars, run in runs.items()
            ]
        ],
    )
    figures = {
        "teacher": str(args.teacher),
        "student": str(args.student),
        "max_steps": args.max_steps,
        # The log's tail only of a run that failed.
        "runs": {
            chars: {key: value for key, value in run.items() if key != "log_tail" or run["returncode"]}
            for chars, run in runs.items()
        },
    }
    publish(args.result, figures, section, args.note)


if __name__ == "__main__":
    main()
