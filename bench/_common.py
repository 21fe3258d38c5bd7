"""What the benchmarks share, so that a script holds only its question: the systems, the arguments
(--data, --out, --result), one-thread settings, corpus conversion, training in a child process (once per
run folder, several at a time), evaluation and child processes that answer in JSON, the machine line every
table carries, and the result file every run saves."""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
# The datasets (one folder each, as in the shared data's README) that --data reads by default.
DATA = ROOT.parent / "shared" / "data"
# What the BLAS and OpenMP thread pools read, once, when numpy and torch are imported.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# bench/report.py renders BENCHMARKS.md and the README's results table from the files here.
RESULTS = ROOT / "bench" / "results"
# key: (name in the table, config in configs/ or None for spaCy's own)
SYSTEMS = {
    "default": (
        "spacy-cner default.cfg (char+bigram+SoftLexicon+LAC's pretrained vectors BiLSTM-CRF, joined pairs)",
        "default.cfg",
    ),
    "pretrain_free": (
        "spacy-cner pretrain_free.cfg (default.cfg with vectors from the train split instead of LAC's: "
        "the default until 2026-11-28)",
        "pretrain_free.cfg",
    ),
    "fast": ("spacy-cner fast.cfg (pretrain_free.cfg without the vectors: the default until 2026-11-26)", "fast.cfg"),
    "bilstm": ("spacy-cner char_bigram.cfg (char+bigram BiLSTM-CRF, the previous default)", "char_bigram.cfg"),
    "tener": ("spacy-cner tener.cfg (char+bigram TENER-CRF)", "tener.cfg"),
    "spacy": ("spaCy ner (init config -l zh -p ner -o efficiency)", None),
}


def add_data_argument(parser: argparse.ArgumentParser, dataset: str = "") -> None:
    """--data DIR: the shared data (../shared/data), or one dataset's folder in it."""
    default = DATA / dataset if dataset else DATA
    parser.add_argument("--data", type=Path, default=default, help=f"default {default}")


def add_out_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """--out DIR: where the script's corpora, trainings and models go (bench/runs/NAME)."""
    default = ROOT / "bench" / "runs" / name
    parser.add_argument("--out", type=Path, default=default, help=f"working folder (default {default})")


def add_result_argument(parser, default: str) -> None:
    """--result NAME: the run's figures go to bench/results/NAME.json ("-": nowhere)."""
    parser.add_argument(
        "--result",
        default=default,
        help=f"save the figures as bench/results/NAME.json, replacing that file ('-': do not save; default {default})",
    )


def single_thread(environ=os.environ):
    """Set every thread pool of environ to one thread and return it: os.environ before numpy and torch are
    imported (they read it once), or a child process's copy ({**os.environ, ...})."""
    environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    return environ


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
        run(
            [
                sys.executable,
                "-m",
                "spacy_cner",
                "convert",
                str(data / f"{split}.char.bmes"),
                str(corpus / f"{split}.spacy"),
                "--scheme",
                "bmes",
                "--repair",
            ],
            quiet=True,
        )
    return corpus


def spacy_ner_config(path: Path) -> Path:
    """spaCy's recommended CPU NER config for Chinese, exactly as `spacy init config` writes it."""
    run(
        [
            sys.executable,
            "-m",
            "spacy",
            "init",
            "config",
            str(path),
            "-l",
            "zh",
            "-p",
            "ner",
            "-o",
            "efficiency",
            "--force",
        ],
        quiet=True,
    )
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
        "from spacy_cner.cli.arguments import parse_config_overrides\n"
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


def evaluate(
    models: dict, speed_models: list, corpus: Path, repeats: int, one_thread: bool = False, seen_recall: bool = False
) -> dict:
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
    command = [
        sys.executable,
        "-c",
        code,
        json.dumps(paths),
        json.dumps(speed_models),
        str(corpus / "test.spacy"),
        str(repeats),
    ] + ([str(corpus / "train.spacy")] if seen_recall else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if one_thread else None
    return json.loads(run(command, env=env).strip().splitlines()[-1])


def train_once(
    config: Path,
    corpus: Path,
    out: Path,
    seed: int,
    max_steps: int,
    one_thread: bool,
    extra: tuple = (),
    reuse: bool = True,
) -> dict:
    """train() into out, unless reuse and out already holds a model-best and its training_stats.json (then
    those stats); the stats are written to out/training_stats.json."""
    stats_path = out / "training_stats.json"
    if reuse and stats_path.exists() and (out / "model-best").exists():
        return json.loads(stats_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    stats = train(config, corpus, out, seed, max_steps, one_thread, extra)
    stats_path.write_text(json.dumps(stats))
    return stats


def run_all(function: Callable, runs: Sequence, jobs: int, waves: bool = False) -> dict:
    """{run: function(run)}, --jobs runs at a time (threads that wait on child processes). waves: the next
    --jobs runs start only when all of the last have ended (runs meant to share the machine side by side)."""
    results = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for start in range(0, len(runs), jobs if waves else max(len(runs), 1)):
            batch = runs[start : start + jobs] if waves else runs
            results.update(zip(batch, pool.map(function, batch)))
    return results


def run_child(code: str, *arguments, env: Optional[dict] = None, failure: str = "") -> dict:
    """Run `python -c code arguments...` and return the JSON of the last stdout line it starts with "RESULT "
    (a child process: its peak memory and thread settings are its own). Exits with its stderr if it fails."""
    done = subprocess.run([sys.executable, "-c", code, *map(str, arguments)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"Failed{failure}:\n{done.stderr[-3000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])


def module_at(revision: str, path: str, name: str, replacements: Sequence[Tuple[str, str]] = ()):
    """The module at path (under the repository) as it was at a git revision, imported under name, for a
    benchmark that runs it beside this checkout's; replacements (old, new) fix its relative imports."""
    import importlib.util
    import tempfile

    source = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, check=True, capture_output=True).stdout
    source = source.decode("utf8")
    for old, new in replacements:
        source = source.replace(old, new)
    copy = Path(tempfile.mkdtemp()) / f"{name}.py"
    copy.write_text(source, encoding="utf8")
    spec = importlib.util.spec_from_file_location(name, copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trained_model(model: Path) -> Dict[str, object]:
    """A model-best of bench_datasets.py (OUT/DATASET/SYSTEM/seedN/model-best): its dataset, system and seed
    names, and its test split (OUT/DATASET/corpus/test.spacy)."""
    return {
        "dataset": model.parents[2].name,
        "system": model.parents[1].name,
        "seed": model.parent.name,
        "test": model.parents[2] / "corpus" / "test.spacy",
    }


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


class Section(NamedTuple):
    """What a bench script prints and saves: its title, notes and tables, each table a list of rows as
    {column: value}, the values data (numbers rounded to what the table shows, text, lists; rows_table says
    how each is shown). save_result keeps the rows as they are and bench/report.py renders BENCHMARKS.md's
    tables from them, so a result file holds no Markdown; markdown() is what the script prints."""

    title: str
    notes: str
    tables: List[List[dict]]

    def markdown(self) -> str:
        lines = [
            f"### {self.title} ({datetime.date.today().isoformat()})",
            "",
            f"Command: `{command_line()}`  ",
            f"Machine: {machine_line()}  ",
            self.notes,
            "",
        ]
        for rows in self.tables:
            if rows:
                lines += markdown_table(rows_table(rows)) + [""]
        return "\n".join(lines)


def rows_table(rows: List[dict]) -> Tuple[List[str], List[str], List[List[str]]]:
    """A table's rows ({column: value}) as (columns, align, cells): one renderer for what scripts print and
    what bench/report.py writes, so the two cannot drift. Columns come in the rows' key order (a key first
    seen in a later row goes after); "X sd" is shown in X's cell as "X ± sd"; a float column shows the most
    decimals any of its values has (the script rounds to what it means), thousands with commas; a list is
    its items joined by " / " where the column's name says "a / b", else by ", "; None is an empty cell.
    Columns of text only are left-aligned, the others right-aligned."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    columns = [key for key in keys if not (key.endswith(" sd") and key[:-3] in keys)]
    for row in rows:
        for key, value in row.items():
            if isinstance(value, dict):
                raise ValueError(
                    f"Table row {row!r}: column {key!r} holds a dict, expected a number, text, "
                    "a list or None (one cell per column: flatten it into columns)"
                )
    decimals = {
        column: max(
            (_decimals(value) for row in rows for key in (column, f"{column} sd") for value in _items(row.get(key))),
            default=0,
        )
        for column in columns
    }
    cells = []
    for row in rows:
        line = []
        for column in columns:
            joiner = " / " if " / " in column else ", "
            cell = _cell(row.get(column), decimals[column], joiner)
            if row.get(f"{column} sd") is not None and cell:
                cell += " ± " + _cell(row[f"{column} sd"], decimals[column], joiner)
            line.append(cell)
        cells.append(line)
    align = [
        "left" if all(isinstance(v, str) for row in rows for v in _items(row.get(column))) else "right"
        for column in columns
    ]
    return columns, align, cells


def markdown_table(table: Tuple[List[str], List[str], List[List[str]]]) -> List[str]:
    """(columns, align, cells) as the lines of a Markdown pipe table."""
    columns, align, cells = table
    return [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---:" if a == "right" else "---" for a in align) + " |",
        *("| " + " | ".join(row) + " |" for row in cells),
    ]


def _items(value) -> list:
    """A cell's values: a list's items, nothing for None, else the value alone."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _decimals(value) -> int:
    """The decimals a float was rounded to (its shortest repr); 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, float):
        return 0
    text = repr(value)
    return 0 if "e" in text or "." not in text else len(text.split(".")[1])


def _cell(value, decimals: int, joiner: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return joiner.join(_cell(item, decimals, joiner) for item in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value) if "e" in repr(value) else f"{value:,.{decimals}f}"
    return str(value)


def publish(name: Optional[str], figures, section: Section, notes: str = "") -> Optional[Path]:
    """Print the section's Markdown, then save_result (what every bench script ends with)."""
    print(section.markdown())
    return save_result(name, figures, section, notes)


def save_result(name: Optional[str], figures, section: Optional[Section] = None, notes: str = "") -> Optional[Path]:
    """Write bench/results/<name>.json: the command, date, machine and code version of this run, its figures
    and the rows of its tables, all data (bench/report.py renders the tables; no Markdown is saved).

    name (str): the file's name; None or "-" saves nothing.
    figures: the run's numbers, JSON-safe (paths become strings).
    section (Section): the script's title, notes and tables as rows of {column: value}.
    notes (str): more notes, after the section's.
    RETURNS (Optional[Path]): the file written.
    """
    if section is not None and not isinstance(section, Section):
        raise TypeError(
            f"save_result's section: expected a Section (title, notes, tables of row dicts), got "
            f"{type(section).__name__}: results hold rows, not Markdown (print_section prints them)"
        )
    if not name or name == "-":
        return None
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"Bad result name {name!r}: expected letters, digits, '_', '-' or '.' (it names a file)")
    section = section or Section("", "", [])
    for rows in section.tables:
        rows_table(rows)  # a cell it cannot show fails here, not later in bench/report.py
    record = {
        "name": name,
        "title": section.title,
        "command": command_line(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "code_version": code_version(),
        "figures": _json_safe(figures),
        "table_rows": _json_safe(section.tables),
        "notes": " ".join(part for part in (section.notes, notes) if part),
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
    return {
        "platform": platform.machine(),
        "os": platform.system(),
        "cpu": cpu_name(),
        "cores": cpu_count(),
        "python": platform.python_version(),
        "line": machine_line(),
    }


def code_version() -> dict:
    """The checkout's commit and whether tracked files differ from it (None where git cannot tell)."""

    def git(*arguments: str) -> Optional[str]:
        result = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


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
