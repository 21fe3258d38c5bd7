"""What the benchmarks share: the systems, corpus conversion, training in a child process,
evaluation, and the machine line every table carries."""
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
# key: (name in the table, config in configs/ or None for spaCy's own)
SYSTEMS = {
    "default": ("spacy-cner default.cfg (char+bigram+SoftLexicon BiLSTM-CRF, joined pairs)", "default.cfg"),
    "bilstm": ("spacy-cner char_bigram.cfg (char+bigram BiLSTM-CRF, the previous default)", "char_bigram.cfg"),
    "tener": ("spacy-cner tener.cfg (char+bigram TENER-CRF)", "tener.cfg"),
    "vectors": ("spacy-cner default_vectors.cfg + vectors from the train split (train-vectors)", "default_vectors.cfg"),
    "spacy": ("spaCy ner (init config -l zh -p ner -o efficiency)", None),
}


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
    """Train in a child process (its log in out/train.log); returns its wall time and peak resident memory.

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
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if one_thread:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # Written as it trains (the dev scores of a long training can be read while it runs).
    command = [sys.executable, "-c", code, str(config), str(out)] + overrides
    with (out / "train.log").open("w", encoding="utf8") as log:
        result = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    output = (out / "train.log").read_text(encoding="utf8")
    if result.returncode != 0:
        sys.exit(f"Failed ({result.returncode}): {' '.join(command)}\n{output[-3000:]}")
    return json.loads(output.strip().splitlines()[-1])


def evaluate(models: dict, speed_models: list, corpus: Path, repeats: int, one_thread: bool = False,
             seen_recall: bool = False) -> dict:
    """Test P/R/F1 of every model; inference chars/s of speed_models, alternating, in one child process
    (on one thread with one_thread, as the trainings with --jobs > 1). seen_recall: also the recall of
    the test entities whose text and label occur as an entity in corpus/train.spacy (r_seen) and of
    the others (r_unseen), n_seen and n_unseen."""
    code = (
        "import json, sys, time, spacy\n"
        "from spacy.tokens import DocBin\n"
        "from spacy.scorer import Scorer\n"
        "from spacy.training import Example\n"
        "models = json.loads(sys.argv[1]); speed_models = json.loads(sys.argv[2])\n"
        "repeats = int(sys.argv[4])\n"
        "nlps = {k: spacy.load(p) for k, p in models.items()}\n"
        "docs = list(DocBin().from_disk(sys.argv[3]).get_docs(next(iter(nlps.values())).vocab))\n"
        "texts = [d.text for d in docs]; n_chars = sum(len(t) for t in texts)\n"
        "out = {}\n"
        "vocab = next(iter(nlps.values())).vocab\n"
        "seen = ({(e.text, e.label_) for d in DocBin().from_disk(sys.argv[5]).get_docs(vocab) for e in d.ents}\n"
        "        if len(sys.argv) > 5 else None)\n"
        "for k, nlp in nlps.items():\n"
        "    predicted = list(nlp.pipe(texts, batch_size=256))  # scored and split by seen / unseen: one pass\n"
        "    s = Scorer(nlp).score([Example(pred, gold) for pred, gold in zip(predicted, docs)])\n"
        "    out[k] = {'p': s['ents_p'], 'r': s['ents_r'], 'f': s['ents_f'], 'seconds': []}\n"
        "    if seen is not None:\n"
        "        hits = {True: [0, 0], False: [0, 0]}\n"
        "        for gold, pred in zip(docs, predicted):\n"
        "            found = {(e.start_char, e.end_char, e.label_) for e in pred.ents}\n"
        "            for e in gold.ents:\n"
        "                hit = hits[(e.text, e.label_) in seen]\n"
        "                hit[0] += (e.start_char, e.end_char, e.label_) in found; hit[1] += 1\n"
        "        out[k].update(r_seen=hits[True][0] / max(hits[True][1], 1), n_seen=hits[True][1],\n"
        "                      r_unseen=hits[False][0] / max(hits[False][1], 1), n_unseen=hits[False][1])\n"
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
               str(corpus / "test.spacy"), str(repeats)] + ([str(corpus / "train.spacy")] if seen_recall else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if one_thread else None
    return json.loads(run(command, env=env).strip().splitlines()[-1])


def run(command: list, quiet: bool = False, env: dict = None) -> str:
    """Run a command, echoing its output unless quiet; raise on failure."""
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if not quiet:
        sys.stderr.write(result.stderr[-3000:])
    if result.returncode != 0:
        sys.exit(f"Failed ({result.returncode}): {' '.join(command)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result.stdout


def cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0))


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"



def split_settings(settings: str) -> List[str]:
    """A --variant's "section.key=value,..." as "section.key=value" strings: a comma starts a new
    setting only before "key=", so JSON values keep theirs."""
    return [setting for setting in re.split(r",(?=[\w.@]+=)", settings) if setting]


def machine_line() -> str:
    """The machine line of a benchmark table."""
    return f"{platform.machine()}, {cpu_count()} CPU cores, {platform.python_version()}, {cpu_name()}"
