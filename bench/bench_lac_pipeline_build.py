"""How long the ready LAC pipeline takes to build and to load (issue 82: built in <= 30 s on a free machine), as a
user runs it: `python -m spacy_cner pretrained pipeline FOLDER` end to end (Python's start and imports, reading LAC's
cached sdist, building the pipeline, writing it), then `import spacy`, `spacy.load(FOLDER)` and a first text, each
in a new process on one thread, --rounds times (the best and the median shown).

    python bench/bench_lac_pipeline_build.py [--rounds 3] [--tokens words] [--result NAME]

Wall time and the child's CPU time (user + system): on a machine other processes share, wall time grows with their
load and CPU time does not, so the two together say what a free machine would take. The sdist must be in the cache
(`python -m spacy_cner pretrained fetch`): a download is not what this times.
"""

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Section, add_result_argument, publish  # noqa: E402

LOAD = r"""
import sys, time
start = time.perf_counter()
import spacy
nlp = spacy.load(sys.argv[1])
doc = nlp("百度是一家高科技公司")
print(time.perf_counter() - start, len(doc.ents))
"""


def timed(command: list, env: dict) -> tuple:
    """(wall seconds, CPU seconds of the child, its stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", default="words", choices=["words", "chars"])
    add_result_argument(parser, "lac_pipeline_build")
    args = parser.parse_args()
    check = subprocess.run([sys.executable, "-m", "spacy_cner", "pretrained", "fetch"], capture_output=True, text=True)
    if check.returncode != 0:
        sys.exit(f"LAC's sdist is not cached (`python -m spacy_cner pretrained fetch`):\n{check.stdout}{check.stderr}")
    installs = [("this environment", dict(os.environ))]
    rounds = []
    with tempfile.TemporaryDirectory() as scratch:
        if importlib.util.find_spec("spacy_transformers") is not None:
            sys.path.insert(0, str(ROOT / "tests"))
            from no_transformers import env_without_transformers

            installs.append(("without spacy-transformers", env_without_transformers(Path(scratch) / "hide")))
        for index in range(args.rounds):
            for install, env in installs:  # alternating, so that a change in the machine's load hits both
                folder = Path(scratch) / f"round{index}" / install.replace(" ", "_") / "zh_lac"
                command = [sys.executable, "-m", "spacy_cner", "pretrained", "pipeline", str(folder)]
                build_wall, build_cpu, _ = timed(command + ["--tokens", args.tokens], env)
                load_wall, load_cpu, printed = timed([sys.executable, "-c", LOAD, str(folder)], env)
                in_process, n_ents = printed.split()
                rounds.append(
                    {
                        "install": install,
                        "round": index + 1,
                        "build wall s": round(build_wall, 1),
                        "build CPU s": round(build_cpu, 1),
                        "load process wall s": round(load_wall, 1),
                        "load process CPU s": round(load_cpu, 1),
                        "import spacy, spacy.load and a text s": round(float(in_process), 2),
                        "entities in the text": int(n_ents),
                    }
                )
    keys = ("build wall s", "build CPU s", "import spacy, spacy.load and a text s")
    summary = [
        {
            "install": install,
            "of the rounds": what,
            **{key: round(function([row[key] for row in mine]), 2) for key in keys},
        }
        for install, _ in installs
        for mine in [[row for row in rounds if row["install"] == install]]
        for what, function in (("best", min), ("median", statistics.median))
    ]
    notes = (
        f"`python -m spacy_cner pretrained pipeline FOLDER --tokens {args.tokens}` in a new process, then "
        "`spacy.load(FOLDER)` and one text in another, one thread each, the sdist read from the cache; "
        f"{args.rounds} rounds. Wall time and the child's CPU time (user + system): other load on the machine "
        "lengthens the first, not the second."
    )
    if len(installs) > 1:
        notes += (
            " spacy-transformers is installed here (the test extra): spaCy imports every installed plugin's "
            "registries at each spacy.load and at the build, and its import of transformers takes seconds of both; "
            "'without spacy-transformers' hides it from the children (tests/no_transformers.py), as on the README's "
            "install."
        )
    publish(
        args.result,
        {"rounds": rounds},
        Section("The ready LAC pipeline: build and load time", notes, [rounds, summary]),
    )


if __name__ == "__main__":
    main()
