"""Resume NER: our CPU configs vs spaCy's built-in `ner`, side by side in one run.

Usage: python bench/bench_resume.py [--data ../shared/data/resume] [--out bench/runs/resume]
       [--systems default bilstm tener spacy] [--seeds 0 1 2] [--jobs 2] [--max-steps N]
       [--repeats 3] [--write BENCHMARKS.md]

Every pipeline trains on the same train split with the best model chosen on dev, once
per seed, and is scored on test. Training runs in a child process each (wall time and
peak memory of that process); with --jobs 2 two trainings run at a time, each on one
thread. Inference speed alternates the systems' seed-0 models in one process, repeated,
so that machine noise hits all alike.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# key: (name in the table, config in configs/ or None for spaCy's own)
SYSTEMS = {
    "default": ("spacy-cner default.cfg (char+bigram+SoftLexicon BiLSTM-CRF, joined pairs)", "default.cfg"),
    "bilstm": ("spacy-cner char_bigram.cfg (char+bigram BiLSTM-CRF, the previous default)", "char_bigram.cfg"),
    "tener": ("spacy-cner tener.cfg (char+bigram TENER-CRF)", "tener.cfg"),
    "spacy": ("spaCy ner (init config -l zh -p ner -o efficiency)", None),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "resume")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "resume")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument("--max-steps", type=int, default=0, help="0: the configs' own stopping rules")
    parser.add_argument("--repeats", type=int, default=3, help="inference passes over test per model")
    parser.add_argument("--write", type=Path, default=None, help="append the table to this Markdown file")
    parser.add_argument(
        "--reuse-training", action="store_true",
        help="skip training: evaluate the models and reuse the training stats of an earlier run in --out",
    )
    args = parser.parse_args()
    corpus = prepare_corpus(args.data, args.out)
    configs = {
        key: ROOT / "configs" / SYSTEMS[key][1] if SYSTEMS[key][1] else spacy_ner_config(args.out / "spacy_ner.cfg")
        for key in args.systems
    }
    runs = [(key, seed) for seed in args.seeds for key in args.systems]

    def train_run(run: tuple) -> dict:
        key, seed = run
        stats_path = args.out / key / f"seed{seed}" / "training_stats.json"
        if not args.reuse_training:
            stats_path.parent.mkdir(parents=True, exist_ok=True)
            stats = train(configs[key], corpus, stats_path.parent, seed, args.max_steps, args.jobs > 1)
            stats_path.write_text(json.dumps(stats))
        return json.loads(stats_path.read_text())

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        training = dict(zip(runs, pool.map(train_run, runs)))
    models = {f"{key}/seed{seed}": args.out / key / f"seed{seed}" / "model-best" for key, seed in runs}
    speed_models = [f"{key}/seed{args.seeds[0]}" for key in args.systems]
    scores = evaluate(models, speed_models, corpus, args.repeats)
    table = render(training, scores, args)
    print(table)
    if args.write is not None:
        with args.write.open("a", encoding="utf8") as file_:
            file_.write("\n" + table)


def prepare_corpus(data: Path, out: Path) -> Path:
    """Check that data holds Resume, and convert it into out/corpus."""
    if not (data / "train.char.bmes").exists():
        sys.exit(f"No Resume data in {data}: pass --data DIR with train/dev/test.char.bmes")
    out.mkdir(parents=True, exist_ok=True)
    return convert(data, out / "corpus")


def convert(data: Path, corpus: Path) -> Path:
    """Convert Resume's BMES files with our converter (2 split entities are repaired)."""
    corpus.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        run([sys.executable, "-m", "spacy_cner", "convert", str(data / f"{split}.char.bmes"),
             str(corpus / f"{split}.spacy"), "--scheme", "bmes", "--repair"], quiet=True)
    return corpus


def spacy_ner_config(path: Path) -> Path:
    """spaCy's recommended CPU NER config for Chinese, exactly as `spacy init config` writes it."""
    run([sys.executable, "-m", "spacy", "init", "config", str(path), "-l", "zh", "-p", "ner",
         "-o", "efficiency", "--force"], quiet=True)
    return path


def train(
    config: Path, corpus: Path, out: Path, seed: int, max_steps: int, one_thread: bool, extra: tuple = ()
) -> dict:
    """Train in a child process; returns its wall time and peak resident memory.

    extra: more `--section.key=value` config overrides.
    """
    overrides = [
        f"--paths.train={corpus / 'train.spacy'}",
        f"--paths.dev={corpus / 'dev.spacy'}",
        f"--system.seed={seed}",
        *extra,
    ]
    if max_steps:
        overrides += [f"--training.max_steps={max_steps}", "--training.max_epochs=0"]
    code = (
        "import resource, sys, time, json\n"
        "from spacy.cli.train import train\n"
        "from spacy.cli._util import parse_config_overrides\n"
        "start = time.perf_counter()\n"
        "train(sys.argv[1], sys.argv[2], overrides=parse_config_overrides(sys.argv[3:]))\n"
        "print(json.dumps({'seconds': time.perf_counter() - start,\n"
        "  'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if one_thread else None
    output = run([sys.executable, "-c", code, str(config), str(out)] + overrides, env=env)
    return json.loads(output.strip().splitlines()[-1])


def evaluate(models: dict, speed_models: list, corpus: Path, repeats: int, one_thread: bool = False) -> dict:
    """Test P/R/F1 of every model; inference chars/s of speed_models, alternating, in one child process
    (on one thread with one_thread, as the trainings with --jobs > 1)."""
    code = (
        "import json, sys, time, spacy\n"
        "from spacy.tokens import DocBin\n"
        "from spacy.training import Example\n"
        "models = json.loads(sys.argv[1]); speed_models = json.loads(sys.argv[2])\n"
        "repeats = int(sys.argv[4])\n"
        "nlps = {k: spacy.load(p) for k, p in models.items()}\n"
        "docs = list(DocBin().from_disk(sys.argv[3]).get_docs(next(iter(nlps.values())).vocab))\n"
        "texts = [d.text for d in docs]; n_chars = sum(len(t) for t in texts)\n"
        "out = {}\n"
        "for k, nlp in nlps.items():\n"
        "    s = nlp.evaluate([Example(nlp.make_doc(d.text), d) for d in docs])\n"
        "    out[k] = {'p': s['ents_p'], 'r': s['ents_r'], 'f': s['ents_f'], 'seconds': []}\n"
        "for _ in range(repeats):\n"
        "    for k in speed_models:\n"
        "        start = time.perf_counter()\n"
        "        for _ in nlps[k].pipe(texts, batch_size=256): pass\n"
        "        out[k]['seconds'].append(time.perf_counter() - start)\n"
        "for k in speed_models:\n"
        "    out[k]['chars_per_s'] = n_chars / min(out[k]['seconds'])\n"
        "print(json.dumps(out))\n"
    )
    paths = {key: str(path) for key, path in models.items()}
    command = [sys.executable, "-c", code, json.dumps(paths), json.dumps(speed_models),
               str(corpus / "test.spacy"), str(repeats)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if one_thread else None
    return json.loads(run(command, env=env).strip().splitlines()[-1])


def render(training: dict, scores: dict, args: argparse.Namespace) -> str:
    """The Markdown table, with the command, date and machine."""
    command = "python bench/bench_resume.py " + " ".join(sys.argv[1:])
    machine = f"{platform.machine()}, {_cpu_count()} CPU cores, {platform.python_version()}, {_cpu_name()}"
    seeds = args.seeds
    threads = f"{args.jobs} trainings at a time, one thread each" if args.jobs > 1 else "one training at a time"
    lines = [
        f"### Resume NER: {', '.join(args.systems)} ({datetime.date.today().isoformat()})",
        "",
        f"Command: `{command.strip()}`  ",
        f"Machine: {machine}  ",
        f"Test split, model chosen on dev; seeds {', '.join(map(str, seeds))} ({threads}). "
        "F1 is the mean over seeds with the sample standard deviation, then each seed's. "
        f"Inference: `nlp.pipe(batch_size=256)` over the test texts with the seed-{seeds[0]} "
        f"model, best of {args.repeats} passes, the systems alternating.",
        "",
        "| system | test P | test R | test F1 | F1 per seed | training wall time | training peak RSS | inference chars/s |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for key in args.systems:
        per_seed = [scores[f"{key}/seed{seed}"] for seed in seeds]
        runs = [training[(key, seed)] for seed in seeds]
        f1 = [s["f"] * 100 for s in per_seed]
        spread = f" ± {statistics.stdev(f1):.2f}" if len(f1) > 1 else ""
        lines.append(
            f"| {SYSTEMS[key][0]} | {statistics.mean(s['p'] for s in per_seed) * 100:.2f} | "
            f"{statistics.mean(s['r'] for s in per_seed) * 100:.2f} | "
            f"{statistics.mean(f1):.2f}{spread} | {', '.join(f'{f:.2f}' for f in f1)} | "
            f"{statistics.mean(r['seconds'] for r in runs) / 60:.1f} min | "
            f"{max(r['peak_mb'] for r in runs):.0f} MB | "
            f"{scores[f'{key}/seed{seeds[0]}']['chars_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def run(command: list, quiet: bool = False, env: dict = None) -> str:
    """Run a command, echoing its output unless quiet; raise on failure."""
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if not quiet:
        sys.stderr.write(result.stderr[-3000:])
    if result.returncode != 0:
        sys.exit(f"Failed ({result.returncode}): {' '.join(command)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result.stdout


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
