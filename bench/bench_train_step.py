"""Seconds per training step of a config, for checkouts of spacy_cner side by side (one thread each).

Usage: python bench/bench_train_step.py --corpus CORPUS [--checkout DIR ...] [--config configs/default.cfg]
       [--steps 150] [--threads 1] [--variant NAME=section.key=value,...] [--result NAME]

CORPUS holds train.spacy and dev.spacy (as bench_datasets.py writes them). Each checkout (a folder
with spacy_cner/ in it, e.g. a `git worktree add /tmp/old REV`; none given: this one) and each
variant (config overrides; "-" removes a section, e.g. components.crf_ner.adversarial=-) trains
--steps steps of `nlp.update` over the train corpus in its own process, from the config's own
initialize, batcher, dropout and optimizer; no evaluation, no saving. With --threads 1 (OMP, MKL
and OpenBLAS threads 1), two processes run at a time (the 2 cores); with --threads 0 (the
libraries' defaults, as a user's `spacy train` runs) one at a time. Compare rows of one run. The
time includes reading the corpus, as spacy train's loop does; it excludes initialize.
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, Section, add_result_argument, save_result, split_settings

CHILD = """
import json, sys, time
from spacy.training import Corpus
from spacy.training.initialize import init_nlp
from spacy.training.loop import create_train_batches
from spacy.util import load_config, registry
from thinc.api import fix_random_seed

config_path, corpus, steps, overrides = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
paths = {"paths.train": corpus + "/train.spacy", "paths.dev": corpus + "/dev.spacy"}
config = load_config(config_path, overrides={**paths, **{k: v for k, v in overrides.items() if v != "-"}},
                     interpolate=False)
for key in (k for k, v in overrides.items() if v == "-"):
    *parents, last = key.split(".")
    section = config
    for name in parents:
        section = section[name]
    del section[last]
fix_random_seed(0)
nlp = init_nlp(config)
training = registry.resolve(nlp.config.interpolate()["training"])
batches = create_train_batches(nlp, Corpus(corpus + "/train.spacy"), training["batcher"], training["max_epochs"] or 100)
optimizer, losses = training["optimizer"], {}
start = time.perf_counter()
for step, (_, batch) in enumerate(batches, 1):
    nlp.update(batch, drop=training["dropout"], sgd=optimizer, losses=losses)
    if step == steps:
        break
print(json.dumps({"seconds": time.perf_counter() - start, "steps": step}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.cfg")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1, help="1: one thread, two runs at a time; 0: the defaults")
    parser.add_argument("--variant", action="append", default=[], help="NAME=section.key=value,...")
    add_result_argument(parser, None)
    args = parser.parse_args()
    checkouts = args.checkout or [ROOT]
    variants = {"config": {}}
    for variant in args.variant:
        name, _, settings = variant.partition("=")
        pairs = (setting.split("=", 1) for setting in split_settings(settings))
        variants[name] = {key: value if value == "-" else _value(value) for key, value in pairs}
    runs = [(checkout, name) for checkout in checkouts for name in variants]

    def run(key):
        checkout, name = key
        env = {var: value for var, value in os.environ.items() if not var.endswith("_NUM_THREADS")}
        if args.threads:
            env.update({var: str(args.threads)
                        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        env["PYTHONPATH"] = str(checkout.resolve())
        command = [sys.executable, "-c", CHILD, str(args.config), str(args.corpus.resolve()), str(args.steps),
                   json.dumps(variants[name])]
        # The child imports spacy_cner from its working folder (sys.path[0] of `python -c`).
        output = subprocess.run(command, env=env, cwd=checkout, capture_output=True, text=True, check=True).stdout
        return json.loads(output.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=2 if args.threads == 1 else 1) as pool:
        results = dict(zip(runs, pool.map(run, runs)))
    rows = [{"checkout": _describe(checkout), "variant": name, **result}
            for (checkout, name), result in results.items()]
    table = [{"checkout": row["checkout"], "variant": row["variant"], "steps": row["steps"],
              "seconds": round(row["seconds"], 1), "ms per step": round(1000 * row["seconds"] / row["steps"])}
             for row in rows]
    section = Section(
        f"Training steps: {args.config.name} on {args.corpus.name}",
        f"{args.steps} steps of nlp.update from the config's initialize, batcher, dropout and optimizer; "
        + ("one thread per process, two processes at a time." if args.threads == 1 else
           f"{args.threads or 'default'} threads per process (OMP, MKL, OpenBLAS), one process at a time."), [table])
    print(section.markdown())
    save_result(args.result or f"train_step_{args.corpus.name}_threads{args.threads}", {"rows": rows}, section)


def _value(text: str):
    """A config value as spaCy's command line reads one: JSON where it parses, else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _describe(checkout: Path) -> str:
    """The checkout's commit (and "+ changes" where its tree differs), or its path outside git."""
    try:
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(checkout)
    return f"{commit}{' + changes' if dirty else ''}"


if __name__ == "__main__":
    main()
