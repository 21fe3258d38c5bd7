"""Resume NER: our default CPU config vs spaCy's built-in `ner`, side by side in one run.

Usage: python bench/bench_resume.py [--data ../shared/data/resume] [--out bench/runs]
       [--max-steps N] [--repeats 3] [--write BENCHMARKS.md]

Both pipelines train on the same train split with the best model chosen on dev, and are
scored on test. Training runs in a child process each (wall time and peak memory of that
process); inference speed alternates the two models in one process, repeated, so that
machine noise hits both alike.
"""
import argparse
import datetime
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = {
    "spacy-cner default (char+bigram BiLSTM-CRF)": "ours",
    "spaCy ner (init config -l zh -p ner -o efficiency)": "spacy",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "resume")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "resume")
    parser.add_argument("--max-steps", type=int, default=0, help="0: the configs' own stopping rules")
    parser.add_argument("--repeats", type=int, default=3, help="inference passes over test per model")
    parser.add_argument("--write", type=Path, default=None, help="append the table to this Markdown file")
    parser.add_argument(
        "--reuse-training", action="store_true",
        help="skip training: evaluate the models and reuse the training stats of an earlier run in --out",
    )
    args = parser.parse_args()
    if not (args.data / "train.char.bmes").exists():
        sys.exit(f"No Resume data in {args.data}: pass --data DIR with train/dev/test.char.bmes")
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = convert(args.data, args.out / "corpus")
    configs = {
        "ours": ROOT / "configs" / "default.cfg",
        "spacy": spacy_ner_config(args.out / "spacy_ner.cfg"),
    }
    training = {}
    for key, config in configs.items():
        stats_path = args.out / key / "training_stats.json"
        if not args.reuse_training:
            stats_path.parent.mkdir(parents=True, exist_ok=True)
            stats_path.write_text(json.dumps(train(key, config, corpus, args.out, args.max_steps)))
        training[key] = json.loads(stats_path.read_text())
    scores = evaluate({key: args.out / key / "model-best" for key in configs}, corpus, args.repeats)
    table = render(training, scores, args)
    print(table)
    if args.write is not None:
        with args.write.open("a", encoding="utf8") as file_:
            file_.write("\n" + table)


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


def train(key: str, config: Path, corpus: Path, out: Path, max_steps: int) -> dict:
    """Train in a child process; returns its wall time and peak resident memory."""
    overrides = [f"--paths.train={corpus / 'train.spacy'}", f"--paths.dev={corpus / 'dev.spacy'}"]
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
    output = run([sys.executable, "-c", code, str(config), str(out / key)] + overrides)
    return json.loads(output.strip().splitlines()[-1])


def evaluate(models: dict, corpus: Path, repeats: int) -> dict:
    """Test P/R/F1 and inference chars/s, the models alternating in one child process."""
    code = (
        "import json, sys, time, resource, spacy\n"
        "from spacy.tokens import DocBin\n"
        "from spacy.training import Example\n"
        "models = json.loads(sys.argv[1]); repeats = int(sys.argv[3])\n"
        "nlps = {k: spacy.load(p) for k, p in models.items()}\n"
        "docs = list(DocBin().from_disk(sys.argv[2]).get_docs(next(iter(nlps.values())).vocab))\n"
        "texts = [d.text for d in docs]; n_chars = sum(len(t) for t in texts)\n"
        "out = {}\n"
        "for k, nlp in nlps.items():\n"
        "    s = nlp.evaluate([Example(nlp.make_doc(d.text), d) for d in docs])\n"
        "    out[k] = {'p': s['ents_p'], 'r': s['ents_r'], 'f': s['ents_f'], 'seconds': []}\n"
        "for _ in range(repeats):\n"
        "    for k, nlp in nlps.items():\n"
        "        start = time.perf_counter()\n"
        "        for _ in nlp.pipe(texts, batch_size=256): pass\n"
        "        out[k]['seconds'].append(time.perf_counter() - start)\n"
        "for k in out:\n"
        "    out[k]['chars_per_s'] = n_chars / min(out[k]['seconds'])\n"
        "print(json.dumps(out))\n"
    )
    paths = {key: str(path) for key, path in models.items()}
    output = run([sys.executable, "-c", code, json.dumps(paths), str(corpus / "test.spacy"), str(repeats)])
    return json.loads(output.strip().splitlines()[-1])


def render(training: dict, scores: dict, args: argparse.Namespace) -> str:
    """The Markdown table, with the command, date and machine."""
    command = "python bench/bench_resume.py " + " ".join(sys.argv[1:])
    machine = f"{platform.machine()}, {_cpu_count()} CPU cores, {platform.python_version()}, {_cpu_name()}"
    lines = [
        f"### Resume NER: spacy-cner vs spaCy ner ({datetime.date.today().isoformat()})",
        "",
        f"Command: `{command.strip()}`  ",
        f"Machine: {machine}  ",
        "Test split, model chosen on dev. Inference: `nlp.pipe(batch_size=256)` over the test "
        f"texts, best of {args.repeats} passes, the two models alternating.",
        "",
        "| system | test P | test R | test F1 | training wall time | training peak RSS | inference chars/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, key in SYSTEMS.items():
        s, t = scores[key], training[key]
        lines.append(
            f"| {name} | {s['p'] * 100:.2f} | {s['r'] * 100:.2f} | {s['f'] * 100:.2f} | "
            f"{t['seconds'] / 60:.1f} min | {t['peak_mb']:.0f} MB | {s['chars_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def run(command: list, quiet: bool = False) -> str:
    """Run a command, echoing its output unless quiet; raise on failure."""
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
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
