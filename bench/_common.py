"""What the benchmarks share: the systems, corpus conversion, training in a child process,
evaluation, the machine line every table carries, and the result file every run saves."""
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, NamedTuple, Optional

ROOT = Path(__file__).resolve().parents[1]
# bench/report.py renders BENCHMARKS.md and the README's results table from the files here.
RESULTS = ROOT / "bench" / "results"
# key: (name in the table, config in configs/ or None for spaCy's own)
SYSTEMS = {
    "default": ("spacy-cner default.cfg (char+bigram+SoftLexicon+vectors from the train split BiLSTM-CRF, "
                "joined pairs)",
                "default.cfg"),
    "fast": ("spacy-cner fast.cfg (default.cfg without the vectors: the default until 2026-11-26)", "fast.cfg"),
    "bilstm": ("spacy-cner char_bigram.cfg (char+bigram BiLSTM-CRF, the previous default)", "char_bigram.cfg"),
    "tener": ("spacy-cner tener.cfg (char+bigram TENER-CRF)", "tener.cfg"),
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


def add_result_argument(parser, default: str) -> None:
    """--result NAME: the run's figures go to bench/results/NAME.json ("-": nowhere)."""
    parser.add_argument("--result", default=default,
                        help=f"save the figures as bench/results/NAME.json, replacing that file ('-': do not save; "
                             f"default {default})")


class Section(NamedTuple):
    """What a bench script prints and saves: its title, notes and tables, each table as
    {"columns", "align" ("left"/"right"), "rows"} of cells. save_result keeps them as they are (nothing is
    parsed back from Markdown); markdown() is what the script prints."""
    title: str
    notes: str
    tables: List[dict]

    def markdown(self) -> str:
        lines = [f"### {self.title} ({datetime.date.today().isoformat()})", "", f"Command: `{command_line()}`  ",
                 f"Machine: {machine_line()}  ", self.notes, ""]
        for table in self.tables:
            lines += ["| " + " | ".join(table["columns"]) + " |",
                      "| " + " | ".join("---:" if a == "right" else "---" for a in table["align"]) + " |",
                      *("| " + " | ".join(row) + " |" for row in table["rows"]), ""]
        return "\n".join(lines)


def table(columns: List[str], rows: List[List[str]], right: int = 1) -> dict:
    """A Section's table: the first `right` columns left-aligned (labels), the others right-aligned (figures)."""
    return {"columns": list(columns), "align": ["left" if i < right else "right" for i in range(len(columns))],
            "rows": [list(row) for row in rows]}


def save_result(name: Optional[str], figures, tables="", notes: str = "") -> Optional[Path]:
    """Write bench/results/<name>.json: the command, date, machine, code version and figures of this run.

    name (str): the file's name; None or "-" saves nothing.
    figures: the run's numbers, JSON-safe (paths become strings).
    tables (Union[Section, str]): the script's title, notes and tables; or (older scripts) the Markdown
        section it printed: its first heading is the title, its pipe tables are kept as columns and rows,
        its other lines (but Command and Machine) as notes.
    notes (str): more notes, after those of the Markdown.
    RETURNS (Optional[Path]): the file written.
    """
    if not name or name == "-":
        return None
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"Bad result name {name!r}: expected letters, digits, '_', '-' or '.' (it names a file)")
    if isinstance(tables, Section):
        title, parsed, prose = tables.title, tables.tables, tables.notes
    else:
        title, parsed, prose = parse_markdown(tables)
    if figures is None:  # the printed tables are the figures
        figures = {"tables": [table_figures(table) for table in parsed]}
    record = {
        "name": name,
        "title": title,
        "command": command_line(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "code_version": code_version(),
        "figures": _json_safe(figures),
        "tables": parsed,
        "notes": " ".join(part for part in (prose, notes) if part),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"Saved {shown}; `python bench/report.py` renders BENCHMARKS.md from it", file=sys.stderr)
    return path


def command_line() -> str:
    """This run's command, as it can be typed again from the repository's root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return "python " + shlex.join([script.as_posix(), *sys.argv[1:]])


def machine() -> dict:
    """The machine a result was measured on."""
    return {"platform": platform.machine(), "os": platform.system(), "cpu": cpu_name(), "cores": cpu_count(),
            "python": platform.python_version(), "line": machine_line()}


def code_version() -> dict:
    """The checkout's commit and whether tracked files differ from it (None where git cannot tell)."""
    def git(*arguments: str) -> Optional[str]:
        result = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def parse_markdown(text: str):
    """A printed Markdown section as (title, tables, prose): the first heading without its date, each
    pipe table as {"columns", "align", "rows"}, and the other lines but Command and Machine, joined."""
    title, tables, prose, rows = "", [], [], None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if rows is None:
                rows = {"columns": cells, "align": [], "rows": []}
                tables.append(rows)
            elif not rows["align"] and all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                rows["align"] = ["right" if cell.endswith(":") else "left" for cell in cells]
            else:
                rows["rows"].append(cells)
            continue
        rows = None
        if line.startswith("#") and not title:
            title = re.sub(r"\s*\(\d{4}-\d{2}-\d{2}\)$", "", line.lstrip("#").strip())
        elif line and not line.startswith(("Command:", "Machine:")):
            prose.append(line)
    return title, tables, " ".join(prose)


def table_figures(table: dict) -> list:
    """A parsed table's rows as {column: value}, numbers read as numbers (cell_value)."""
    rows = []
    for cells in table["rows"]:
        row = {}
        for column, cell in zip(table["columns"], cells):
            value = cell_value(cell)
            if isinstance(value, tuple):  # "mean ± sd"
                row[column], row[f"{column} sd"] = value
            else:
                row[column] = value
        rows.append(row)
    return rows


def cell_value(cell: str):
    """A table cell as a number where it is one: "**1,234**" -> 1234, "0.17%" -> 0.17, "13.5 min" -> 13.5,
    "1.96x" -> 1.96, "93.45 ± 0.79" -> (93.45, 0.79); anything else stays the text."""
    text = cell.replace("**", "").strip()
    match = re.fullmatch(r"([-+]?[\d,]*\.?\d+)\s*±\s*(\d*\.?\d+)", text)
    if match:
        return float(match.group(1).replace(",", "")), float(match.group(2))
    match = re.fullmatch(r"([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*(%|x|min|s|ms|MB|GB)?", text)
    if not match:
        return cell
    number = match.group(1).replace(",", "")
    return float(number) if "." in number else int(number)


def _json_safe(value):
    """value with tuple keys joined by "/", paths and other objects as strings, for json.dumps."""
    if isinstance(value, dict):
        return {"/".join(map(str, k)) if isinstance(k, tuple) else str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)
