"""Render BENCHMARKS.md, bench/DETAILS.md and the README's results table from bench/results/*.json.

Usage: python bench/report.py [--check]

Every bench script saves what it measured as bench/results/<name>.json, with the command, date,
machine and code version, its tables as rows of data (bench/_common.py, `save_result`; this renders them with
the scripts' own `rows_table`); a file transcribed from the notebook of
earlier runs (bench/HISTORY.md) or from a commit message says so in `transcribed_from`. This script
renders, current numbers first: where each open issue's targets stand, then each question's answer,
then any result no question names yet; and the README's results table, between its two markers. The
targets, the questions and the result names each reads are data, in bench/questions.toml; the figures
are only in bench/results/. A rerun of a script replaces its result file (same --result name); a new
question is a [[questions]] entry; a question's results may name a glob pattern ("lac_finetune_*"), so a
new file of that name joins it unedited. --check writes nothing and exits 1 if BENCHMARKS.md,
bench/DETAILS.md or the README's table differs from what this would write.

Two pages. BENCHMARKS.md answers each question with its headline tables only: the results its `headline`
list in questions.toml names (names or patterns; without one, every current result of it), their first
tables joined where their columns agree (a question with pool_seeds shows seeds pooled: students_table,
seed_rows_pooled); every other current result of the question is one line under "Also measured" (its
name, title and date, linking to its section of bench/DETAILS.md), and the page has no command lines.
bench/DETAILS.md holds, question by question, every result's tables in full and its source line
(command, date, machine, code version, notes), the earlier runs included. A headline is chosen to answer
the question today in a table of at most about 30 rows; tests/test_bench_report.py keeps BENCHMARKS.md
under 500 lines.

Earlier runs: a result a later run replaces says so in its file, `"superseded_by": "NAME"` (the replacing
result's name), and its question in BENCHMARKS.md then names it in its last line ("earlier runs a later
one replaced") instead of showing its tables; bench/DETAILS.md shows it in full under "Earlier runs" (the
file stays: the data is never deleted). The rule, kept conservative: mark R superseded by S only when S is
later, answers the same question on the same dataset (the same test split) and covers every model row R
shows for the same system: the same trained model measured again (the same test F1), or the same committed
config retrained at the settings it has since (e.g. student.cfg's patience 1,600 -> 4,000, student_lexicon.cfg
without -> with softword). A result holding a variant no later run measures again stays current: it is that
variant's only record. load_records refuses a superseded_by naming no result, a result of its own or a later
date, or a chain that loops.
"""

import argparse
import fnmatch
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

try:
    import tomllib
except ImportError:  # Python 3.10: tomli is tomllib's package before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "bench") not in sys.path:  # run as `python bench/report.py` or imported by the tests
    sys.path.insert(0, str(ROOT / "bench"))
from _common import markdown_table, rows_table  # noqa: E402  (one renderer: scripts print what this writes)

RESULTS = ROOT / "bench" / "results"
BENCHMARKS = ROOT / "BENCHMARKS.md"
DETAILS = ROOT / "bench" / "DETAILS.md"
README = ROOT / "README.md"
README_MARKERS = ("<!-- results:start -->", "<!-- results:end -->")
# No table cell of BENCHMARKS.md is longer: a longer one keeps its first words and a footnote mark,
# its whole text in the footnote under the table (the README's table is not capped: its cells are short).
MAX_CELL = 120
QUESTIONS_FILE = ROOT / "bench" / "questions.toml"
DATA = tomllib.loads(QUESTIONS_FILE.read_text(encoding="utf8"))

Records = Dict[str, dict]
Table = Tuple[List[str], List[str], List[List[str]]]  # columns, align ("left"/"right"), rows


class Target(NamedTuple):
    text: str
    measure: Callable[..., Tuple[str, str]]  # (the results, **params) -> (measured, status)
    params: dict = {}  # its goals


class Question(NamedTuple):
    key: str  # its anchor in BENCHMARKS.md
    title: str
    results: List[Tuple[str, str]]  # (result name, label of its rows; "" for none)
    label: str = ""  # the label column's header ("": no label column)
    table: Optional[Callable[[Records], Table]] = None  # a table built from the figures, instead of the results'
    images: List[Tuple[str, str]] = []  # committed images shown under the tables: (caption, path)
    pool_seeds: bool = False  # bench_distill results as one row per student config (students_table)
    headline: Optional[List[str]] = None  # the results its tables in BENCHMARKS.md show (None: every current one)


# ---- reading the figures, whichever way a result holds them ----


def figure_rows(record: dict) -> List[dict]:
    """A result's rows: the script's `rows`, or (LEGACY: results whose script saved no figures) its first
    table's rows read as numbers when it was saved."""
    figures = record["figures"]
    return figures["rows"] if "rows" in figures else figures["tables"][0]


def dataset_row(records: Records, name: str, dataset: str, system: str) -> Optional[dict]:
    """The row of a bench_datasets result for one dataset and system (None if the result is missing)."""
    if name not in records:
        return None
    return next(
        (row for row in figure_rows(records[name]) if row["dataset"] == dataset and row["system"] == system), None
    )


def number(text) -> float:
    """The first number in a cell ("**9.4 min** (563.2 s)" -> 9.4)."""
    return text if isinstance(text, (int, float)) else float(re.search(r"\d+(?:\.\d+)?", text).group())


def f1_text(row: dict) -> str:
    return f"{row['f1']:.2f}" + (f" ± {row['f1_sd']:.2f}" if row.get("f1_sd") is not None else "")


def seeds_text(rows: List[dict], key: str = "f1") -> str:
    """Each seed's value, then the mean of two or more."""
    values = [row[key] for row in rows]
    seeds = [seed for row in rows for seed in row["seeds"]]
    text = ", ".join(f"{value:.2f}" for value in values) + f" (seed{'s' if len(seeds) > 1 else ''} "
    text += ", ".join(map(str, seeds))
    return text + (f"; mean {statistics.mean(values):.2f})" if len(values) > 1 else ")")


def gap(value: float, goal: float, unit: str = "") -> str:
    return f"not met: {round(value - goal, 2):+g}{unit}"


def missing(*names: str) -> Tuple[str, str]:
    return f"no result yet ({', '.join(f'bench/results/{name}.json' for name in names)})", "not measured"


# ---- issue 33 (scale) ----


def _runs(name: str) -> Tuple[Tuple[str, str], ...]:
    """A named list of runs of bench/questions.toml: (result name, system key) pairs."""
    return tuple((result, system) for result, system in DATA["runs"][name])


MSRA_SPACY, MSRA_FAST, MSRA_DEFAULT, MSRA_BEFORE = (
    _runs(name) for name in ("msra_spacy", "msra_fast", "msra_default", "msra_before")
)
SMALL_VECTORS_SEEDS = tuple(DATA["results"]["small_vectors_seeds"])
RESUME_TIME = DATA["results"]["resume_time"]
FGM_SHARE = DATA["results"]["fgm_share"]
MORE_SEEDS = DATA["results"]["more_seeds"]
LAC_RESULTS = tuple(DATA["results"]["lac"])
LAC_SPEED = DATA["results"]["lac_speed"]
LAC_MSRA = DATA["results"]["lac_msra"]


def _rows(records: Records, names) -> List[dict]:
    return [row for name, system in names if (row := dataset_row(records, name, "msra", system))]


def _msra(records: Records):
    """MSRA's rows of fast.cfg and of default.cfg (with vectors and the large-corpus rule), one per seed
    run so far."""
    return _rows(records, MSRA_FAST), _rows(records, MSRA_DEFAULT)


def _of_three(rows: List[dict]) -> str:
    return f" ({len(rows)} seed{'s' * (len(rows) != 1)} of 3)" if len(rows) < 3 else ""


def msra_robustness(records: Records) -> Tuple[str, str]:
    fast, default = _msra(records)
    if not fast or not default:
        return missing(*(name for name, _ in MSRA_DEFAULT[:1] + MSRA_FAST[:1]))
    mean = statistics.mean(row["r_f1"] for row in default)
    before = _rows(records, MSRA_BEFORE)
    measured = (
        f"default.cfg {seeds_text(default, 'r_f1')}"
        + (f"; before the rule {seeds_text(before, 'r_f1')}" if before else "")
        + f"; fast.cfg {seeds_text(fast, 'r_f1')}"
    )
    status = ("met" if mean >= 99.5 else gap(mean, 99.5)) + _of_three(default)
    predict = [
        row
        for row in records.get("sentence_encoding", {}).get("figures", {}).get("rows", [])
        if row["dataset"] == "msra"
    ]
    if predict:  # bench_sentence_encoding: trained MSRA models re-scored with each sentence encoded alone
        names = {"vectors": "default.cfg before the rule", "default": "fast.cfg", "nofgm12": "default.cfg without FGM"}
        values = [100 * row["predict"]["r_f"] for row in predict]
        measured += (
            "; the models before the rule and fast.cfg's read whole docs. Predicting with each sentence alone "
            '(sentence_encoding "predict", the default since 2026-11-26), models re-scored: '
            + ", ".join(
                f"{names.get(row['system'], row['system'])} {row['seed'].replace('seed', 'seed ')} "
                f"{100 * row['whole']['r_f']:.2f} -> {100 * row['predict']['r_f']:.2f}"
                for row in predict
            )
        )
        status += (
            f'; with "predict": {min(values):.2f}-{max(values):.2f} on the {len(values)} re-scored '
            f"model{'s' * (len(values) != 1)}"
        )
    return measured, status


# ---- issue 34 (lean) ----


def int8_speed(records: Records) -> Tuple[str, str]:
    # bench/bench_int8.py at 56599d3 (2026-11-26), its table in bench/HISTORY.md ("and int8 inference"); since
    # 2026-11-28 bench_int8 also times bfloat16 (result int8) and bench_speed runs precision "bfloat16".
    text = (
        "int8: torch's dynamic int8 LSTM runs in 0.92-0.97x fp32's time and a doc's output then depends on its "
        "batch (up to 3e-2): no int8 setting (bench/HISTORY.md)"
    )
    times = records.get("int8", {}).get("figures", {}).get("over_fp32_time", {})
    if "lstm int8" in times:
        alone = records["int8"]["figures"]["first_row_alone_vs_batch"]
        text = (
            f"bench_int8 on {records['int8'].get('machine', {}).get('cpu', 'this machine')}, one thread, time / "
            f"fp32: the LSTM {times['lstm int8']:.2f}x in int8 (dynamic) and "
            f"{times['lstm bf16']:.2f}x in bfloat16, the Maxout product {times['linear int8']:.2f}x and "
            f"{times['linear bf16']:.2f}x; a row's int8 output "
            f"depends on its batch (up to {max(alone['lstm int8'], alone['linear int8']):.0e}): no int8 setting"
        )
    ratios = {}
    for name in ("speed_one_thread", "speed_default_threads"):
        rows = records.get(name, {}).get("figures", {}).get("rows", [])
        found = {
            row["dataset"]: row["chars_per_s"]["ours, bfloat16"] / row["chars_per_s"]["spaCy ner"]
            for row in rows
            if "ours, bfloat16" in row["chars_per_s"]
        }
        if found:
            ratios[name] = found
            cpu = records[name].get("machine", {}).get("cpu", "")
            text += (
                f'; precision "bfloat16" instead '
                f"({'one thread' if name == 'speed_one_thread' else 'default threads'}"
                f"{', on ' + cpu if cpu else ''}): " + ", ".join(f"{d} {r:.2f}x" for d, r in found.items())
            )
    if not ratios:
        return text, "not met"
    worst = min(min(found.values()) for found in ratios.values())
    return text, "met" if worst >= 4.0 else gap(worst, 4.0, "x")


def same_entities(records: Records) -> Tuple[str, str]:
    # rjieba where it gives jieba's words: its table (2026-11-26) is in bench/HISTORY.md; tests/test_segmenter.py
    # checks the words on every corpus file and on random text.
    checks = ["rjieba: identical entities"]
    for name in ("speed_one_thread", "speed_default_threads"):
        rows = records.get(name, {}).get("figures", {}).get("rows", [])
        for key, what in (
            ("rjieba_same_entities", "rjieba and jieba"),
            ("rowwise_same_entities", "fixed blocks and row by row"),
        ):
            if rows and key in rows[0]:
                same = all(row[key] for row in rows)
                checks.append(f"{name}: {'the same' if same else 'DIFFERENT'} entities with {what}")
    different = any("DIFFERENT" in check for check in checks)
    saved = _save_weights_shifts(records)
    if saved:
        checks.append(
            "save_weights (not exact): test F1 within "
            + ", ".join(f"{shift:.2f} ({mode})" for mode, shift in saved.items())
            + f" of float32 on {_n_weights_models(records)} "
            "models (2 seeds of each dataset)"
        )
    blocks = records.get("products", {}).get("figures", {}).get("models") or []
    # bench_products' run of 2026-11-27, retired to bench/HISTORY.md ("Matrix products per OpenBLAS kernel")
    if not blocks:
        checks.append(
            "fixed-block products (not exact): test F1 within 0.00 of row by row on 12 models, "
            "every test doc with the same entities (bench/HISTORY.md)"
        )
        saved = {**saved, "fixed blocks": 0.0}
    if blocks:
        shift = max(100 * abs(row["f"]["blocks"] - row["f"]["row by row"]) for row in blocks)
        fewest = min(row["same_docs"] for row in blocks)
        docs = "every test doc" if fewest == 1 else f"{100 * fewest:.2f}-100% of test docs"
        checks.append(
            f"fixed-block products (not exact): test F1 within {shift:.2f} of row by row on {len(blocks)} "
            f"models, {docs} with the same entities"
        )
        saved = {**saved, "fixed blocks": shift}
    too_far = any(shift > 0.1 for shift in saved.values())
    status = "met so far" if saved and not too_far else "met so far (exact changes only)"
    return (
        "; ".join(checks) + "; training unchanged below 530k train tokens (the large-corpus rule and the "
        "3-epoch patience, issue 33)",
        "not met: entities differ" if different else ("not met: a change moves F1 by over 0.1" if too_far else status),
    )


def _save_weights_shifts(records: Records) -> Dict[str, float]:
    """bench_weights16: per save_weights setting, the largest test F1 change of a model, in points."""
    rows = records.get("weights16", {}).get("figures", {}).get("rows", [])
    if not rows or not isinstance(rows[0].get("f"), dict):
        return {}
    return {mode: max(100 * abs(row["f"][mode] - row["f32"]) for row in rows) for mode in rows[0]["f"]}


def _n_weights_models(records: Records) -> int:
    return len(records["weights16"]["figures"]["rows"])


def int8_accuracy(records: Records) -> Tuple[str, str]:
    shifts = _save_weights_shifts(records)
    stored = (
        f"; int8 storage of the embedding tables only (save_weights int8-tables, computed in float32): test F1 "
        f"within {shifts['int8-tables']:.2f}"
        if "int8-tables" in shifts
        else ""
    )
    rows = records.get("precision_models", {}).get("figures", {}).get("rows", [])
    if not rows:
        return "int8 is not a setting (see above)" + stored, "not measured"
    worst = max(100 * abs(row["f"]["bfloat16"] - row["f"]["float32"]) for row in rows)
    fewest, most = min(row["same_docs"] for row in rows), max(row["same_docs"] for row in rows)
    alone = all(row["alone_as_batched"] for row in rows)
    datasets = sorted({Path(row["test"]).parent.parent.name for row in rows})
    text = (
        f'precision "bfloat16" (int8 is not a setting, see above): test F1 within {worst:.2f} of float32 on '
        f"{len(rows)} models ({', '.join(datasets)}), {100 * fewest:.2f}-{100 * most:.2f}% of test docs "
        f"with the same entities, "
        f"a doc alone as in its batch: {'yes' if alone else 'NO'}" + stored
    )
    return text, "met (bfloat16)" if worst <= 0.3 and alone else "not met"


def resume_training(records: Records) -> Tuple[str, str]:
    now = dataset_row(records, RESUME_TIME, "resume", "default")
    if "resume_training_time" not in records and not now:
        return missing(RESUME_TIME)
    parts, minutes = [], []
    if now:
        minutes = [now["training_min"]]
        parts.append(
            f"{now['training_min']:.1f} min (default.cfg, its vectors included, alone on the 2 cores with the "
            f"default threads, seed 0: test F1 {now['f1']:.2f})"
        )
    if "resume_training_time" in records:
        before = [number(row["wall time"]) for row in figure_rows(records["resume_training_time"])]
        minutes = minutes or before
        parts.append(
            ", ".join(f"{m:.1f} min" for m in before)
            + " (`spacy train` alone, default threads, seeds 0 and 1"
            + (", 2026-11-25: the default before its vectors)" if now else ")")
        )
    return "; ".join(parts), "met" if max(minutes) <= 6 else gap(max(minutes), 6, " min")


def training_accuracy(records: Records) -> Tuple[str, str]:
    tried = dataset_row(records, "datasets_resume_fgm2", "resume", "fgm2")
    base = [row for name in SMALL_VECTORS_SEEDS if (row := dataset_row(records, name, "resume", "vectors"))]
    if not tried or not base:
        return "no change to training yet", "n/a"
    mean = statistics.mean(row["f1"] for row in base)
    shares = [
        (share, row)
        for share, system in (("a half", "half"), ("a quarter", "quarter"))
        if (row := dataset_row(records, FGM_SHARE, "resume", system))
    ]
    share_text = "".join(
        f"; FGM's second pass on {share} of each batch (adversarial.share), Resume {row['f1']:.2f} "
        f"({row['f1'] - mean:+.2f}, dev {row['dev_f1']:.2f})"
        for share, row in shares
    )
    return (
        f"tried, not adopted: FGM at every second step, Resume {tried['f1']:.2f} (3 seeds) against default.cfg's "
        f"{mean:.2f} ({tried['f1'] - mean:+.2f}, dev {tried['dev_f1']:.2f} against "
        f"{statistics.mean(row['dev_f1'] for row in base):.2f}){share_text}; adopted only above 1.5M train tokens "
        "(default.cfg's large-corpus rule, issue 33): the five small sets train as before (the same epochs, "
        "patience, batches and FGM at every update)",
        "n/a",
    )


# ---- issue 37 (active learning) ----


def labels_saved(records: Records) -> Tuple[str, str]:
    """Issue 37's first target, from the rounds' models and, where bench_select ran them (--final-sizes),
    from the labelled sentences trained to default.cfg's stopping rule: those decide once they cover three
    datasets (the rounds train for a fixed number of steps, a warm-started curve for more at each size)."""
    text, status = _labels_saved(records, "curves")
    finals = select_curves(records, "finals")
    if not finals:
        return text, status
    final_text, final_status = _labels_saved(records, "finals")
    text = (
        f"each round's model: {text}. The labelled sentences trained from scratch to default.cfg's stopping "
        f"rule: {final_text}{_more_seeds(records, finals)}"
    )
    if len(finals) >= 3:
        return text, final_status
    return text, f"{status} (trained to the stopping rule: {len(finals)} of 3 datasets)"


def _more_seeds(records: Records, finals: List[Tuple[str, int, Dict[str, Dict[str, dict]]]]) -> str:
    """The finals' means with MORE_SEEDS' seeds added: each strategy at the sizes MORE_SEEDS trained, random at
    --stop."""
    if MORE_SEEDS not in records:
        return ""
    parts = []
    for dataset, stop, curves in finals:
        more = records[MORE_SEEDS]["figures"]["finals"].get(dataset)
        if not more:
            continue
        merged = {name: {**curves.get(name, {}), **seeds} for name, seeds in more.items()}
        target, n_random = random_target(merged, stop)
        for name, seeds in merged.items():
            if is_random(name) or target is None:
                continue
            for n in sorted({n for seed in more.get(name, {}).values() for n in seed}, key=int):
                values = [seed[n]["f"] for seed in seeds.values() if n in seed]
                parts.append(
                    f"{dataset}, {name}, {len(values)} seeds: {statistics.mean(values) * 100:.2f} "
                    f"at {int(n):,} against random's {target * 100:.2f} at {stop:,} ({n_random} seeds)"
                )
    return f". With more seeds ({MORE_SEEDS}): {'; '.join(parts)}" if parts else ""


def _labels_saved(records: Records, key: str) -> Tuple[str, str]:
    runs = select_curves(records, key)
    if not runs:
        return "bench/bench_select.py has not run yet (no bench/results/select*.json)", "not measured"
    reached, texts = {}, []
    # strategy -> dataset -> (the fewest labels reaching random's F1 or None, --stop, seeds beside random)
    per_strategy: Dict[str, Dict[str, Tuple[Optional[int], int, int]]] = {}
    warm_random = True  # every dataset has a warm-started random curve on 3 seeds or more
    for dataset, stop, curves in runs:
        target, random_seeds = random_target(curves, stop)
        warm_random = warm_random and len(curves.get("random (warm)", {})) >= 3
        here = {}
        for strategy, seeds in curves.items():
            if is_random(strategy) or target is None:
                continue
            sizes = {n for seed in seeds.values() for n in seed}
            hits = [int(n) for n in sizes if statistics.mean(s[n]["f"] for s in seeds.values() if n in s) >= target]
            here[strategy] = (min(hits) if hits else None, stop, min(len(seeds), random_seeds))
            per_strategy.setdefault(strategy, {})[dataset] = here[strategy]
        # The fewest labels, then the most seeds behind them; not reached: the seeds of the strategy run on
        # the most of them (a one-seed trial does not lower it).
        best = min(((n, -k) for n, _, k in here.values() if n is not None), default=None)
        n_seeds = -best[1] if best else max((k for _, _, k in here.values()), default=random_seeds)
        reached[dataset] = (best[0] if best else None, stop, n_seeds)
        texts.append(
            f"{dataset} {f'{best[0]:,}' if best else 'not reached'} ({n_seeds} seed{'s' * (n_seeds > 1)}"
            + (f"; random's {target * 100:.2f})" if target is not None else ")")
        )
    # The target asks for one strategy that saves the labels everywhere, not each dataset's best.
    everywhere = sorted(
        strategy
        for strategy, found in per_strategy.items()
        if set(found) == set(reached)
        and all(n is not None and n <= 0.6 * stop and n_seeds >= 3 for n, stop, n_seeds in found.values())
    )
    met = len(reached) >= 3 and bool(everywhere)
    stops = sorted({stop for _, stop, _ in reached.values()})
    # Where none saves 40% everywhere: the strategy that reaches random on every dataset with the smallest share.
    shares = {
        strategy: max(n / stop for n, stop, _ in found.values())
        for strategy, found in per_strategy.items()
        if set(found) == set(reached) and all(n is not None and k >= 3 for n, _, k in found.values())
    }
    closest = min(shares, key=lambda strategy: (shares[strategy], strategy), default=None)
    status = "met" if met else "not met"
    if key == "curves" and met and not warm_random and all("warm" in strategy for strategy in everywhere):
        # Its rounds train on from the last (more steps in all) while random retrains from scratch at each size.
        status = "met, by a warm-started strategy against random retrained from scratch (no warm random curve yet)"
    randoms = "(the better of random from scratch and random (warm))" if key == "curves" else "(random's sentences)"
    return (
        f"fewest labels at which a strategy's mean reaches random's F1 at {'/'.join(f'{s:,}' for s in stops)} "
        f"{randoms}: "
        + ", ".join(texts)
        + "; one strategy within 60% of the labels on every dataset (3 seeds): "
        + (", ".join(everywhere) if everywhere else "none")
        + (
            f" (closest: {closest}, on every dataset with at most {shares[closest]:.0%} of random's labels)"
            if closest and not everywhere
            else ""
        )
    ), status


def ranking_speed(records: Records) -> Tuple[str, str]:
    name = "annotate_select" if "annotate_select" in records else "annotate"
    setups = records.get(name, {}).get("figures", {}).get("setups", {})
    base = setups.get("local1", {}).get("chars_per_s")
    ratios = {name: r["chars_per_s"] / base for name, r in setups.items() if name.startswith("select") and base}
    if not ratios:
        return "bench/bench_annotate.py has not timed `select` yet", "not measured"
    n_docs = records[name]["figures"]["docs"]
    text = f"{n_docs:,} texts, against `annotate` (one process): " + ", ".join(
        f"{name} {ratio:.2f}x" for name, ratio in ratios.items()
    )
    single = [ratio for name, ratio in ratios.items() if not name.endswith("2")]
    met = n_docs >= 100_000 and min(single) >= 0.5
    return text, "met" if met else ("not met" if min(single) < 0.5 else f"met at {n_docs:,} texts (target 100k)")


def select_curves(records: Records, key: str = "curves") -> List[Tuple[str, int, Dict[str, Dict[str, dict]]]]:
    """(dataset, --stop, strategy -> seed -> {labelled sentences: {"f": test F1, ...}}) of every select* result:
    key "curves", the rounds' models; "finals", the labelled sentences trained from scratch to the config's
    own stopping rule (bench_select --final-sizes). A dataset in several results (e.g. the finals of two
    variants of a strategy) is one entry, its curves merged (a curve in two: the later result's, by name);
    their --stop must agree."""
    merged: Dict[str, Tuple[int, Dict[str, Dict[str, dict]]]] = {}
    for name, record in sorted(records.items()):
        if not name.startswith("select"):
            continue
        stop = record["figures"]["stop"]
        for dataset, curves in record["figures"].get(key, {}).items():
            if dataset in merged and merged[dataset][0] != stop:
                raise ValueError(
                    f"{name}: {dataset}'s {key} stop at {stop:,}, another select result's at "
                    f"{merged[dataset][0]:,}: not one table"
                )
            merged.setdefault(dataset, (stop, {}))[1].update(curves)
    return [(dataset, stop, curves) for dataset, (stop, curves) in merged.items()]


def is_random(curve: str) -> bool:
    """Whether a bench_select curve is random sampling: "random" (each size trained from scratch) or
    "random (warm)" (each round trained on from the last, the baseline of the warm strategies)."""
    return curve.split(" (")[0] == "random"


def random_target(curves: Dict[str, Dict[str, dict]], stop: int) -> Tuple[Optional[float], int]:
    """The F1 a strategy must reach: the best random curve's mean test F1 at --stop over its seeds
    (from scratch or warm-started, whichever is higher), and that curve's seeds; (None, 0) when no
    random curve reached --stop."""
    means = [
        (statistics.mean(c[str(stop)]["f"] for c in seeds.values() if str(stop) in c), len(seeds))
        for name, seeds in curves.items()
        if is_random(name) and any(str(stop) in c for c in seeds.values())
    ]
    return max(means, default=(None, 0))


# How a finals curve is named in the table beside the rounds' curves.
FINALS = ", trained from scratch to the stopping rule"


def select_table(records: Records, keys: Tuple[str, ...] = ("curves",)) -> Table:
    """Test F1 (mean ± sd over seeds) of each strategy at each number of labelled sentences, per dataset,
    and the fewest labels at which its mean reaches random's at --stop (the better random curve); keys as
    select_curves' key, their rows one after the other (a finals curve named with FINALS), each compared
    with the random curves of its own key."""
    runs = [(key, *run) for key in keys for run in select_curves(records, key)]
    sizes = sorted({int(n) for *_, curves in runs for seeds in curves.values() for c in seeds.values() for n in c})
    rows = []
    for key, dataset, stop, curves in runs:
        target, _ = random_target(curves, stop)
        for strategy, seeds in curves.items():
            cells, reached = [], None
            for n in sizes:
                values = [c[str(n)]["f"] for c in seeds.values() if str(n) in c]
                if not values:
                    cells.append("")
                    continue
                mean = statistics.mean(values)  # unscaled, as random_target's: the curve that sets it reaches it
                sd = statistics.stdev(values) * 100 if len(values) > 1 else 0.0
                cells.append(f"{mean * 100:.2f} ± {sd:.2f}" if len(values) > 1 else f"{mean * 100:.2f}")
                if reached is None and target is not None and mean >= target:
                    reached = n
            name = strategy + FINALS if key == "finals" and len(keys) > 1 else strategy
            rows.append([dataset, name, str(len(seeds)), *cells, f"{reached:,}" if reached else "no"])
    columns = ["dataset", "strategy", "seeds", *(f"{n:,}" for n in sizes), "reaches random's F1 at the last size"]
    return columns, ["left", "left", "right", *("right" for _ in sizes), "right"], rows


# ---- issue 55 (pretrained knowledge): LAC's vectors ----


def lac_rows(records: Records, dataset: str) -> List[dict]:
    return [
        row
        for name in LAC_RESULTS
        if name in records
        for row in figure_rows(records[name])
        if row["dataset"] == dataset and row["system"].startswith("lac_")
    ]


def default_seeds(records: Records, dataset: str) -> List[float]:
    """Today's default.cfg's test F1 per seed run so far on a small set (system "vectors" in those runs)."""
    return [row["f1"] for name in SMALL_VECTORS_SEEDS if (row := dataset_row(records, name, dataset, "vectors"))]


def lac_best(records: Records, dataset: str) -> Optional[dict]:
    """The LAC variant with the best dev F1 on dataset (chosen on dev, as the issue says)."""
    rows = lac_rows(records, dataset)
    return max(rows, key=lambda row: row["dev_f1"]) if rows else None


def lac_default_pooled(records: Records, dataset: str) -> Optional[dict]:
    """Today's default (LAC's vectors) on dataset: every seed of its runs in the comparison ([comparison.lac]) pooled
    (pooled_seeds), as the README's column reads them."""
    rows = [
        row
        for runs in LAC_DEFAULT.values()
        for run in runs
        if run[1] == dataset and (row := dataset_row(records, *run))
    ]
    return {"system": "default", **pooled_seeds(rows)} if rows else None


def _lac_against(records: Records, dataset: str, goal: Callable[[float], float]) -> Tuple[str, str, bool]:
    """Today's default on dataset (its pooled seeds; before the comparison has a run there, the LAC variant best on
    dev) against the goal of pretrain_free's mean."""
    best = lac_default_pooled(records, dataset) or lac_best(records, dataset)
    default = default_seeds(records, dataset)
    if best is None:
        return "", "", False
    seeds = len(best["seeds"])
    base = f", pretrain_free {statistics.mean(default):.2f} ({len(default)} seeds)" if default else ""
    return (
        f"{dataset} {best['system']} {best['f1']:.2f} ({seeds} seed{'s' if seeds > 1 else ''}{base})",
        "" if seeds >= 3 else f" ({seeds} seed of 3)",
        best["f1"] >= goal(statistics.mean(default) if default else 0.0),
    )


def lac_resume(records: Records, goal: float) -> Tuple[str, str]:
    text, seeds, ok = _lac_against(records, "resume", lambda default: goal)
    return (text, ("met" if ok else "not met") + seeds) if text else missing(*LAC_RESULTS)


def lac_others(records: Records, margin: float) -> Tuple[str, str]:
    parts, oks, partial = [], [], False
    for dataset in ("youku", "ecommerce", "taobao", "peoples_daily"):
        text, seeds, ok = _lac_against(records, dataset, lambda default: default + margin)
        if text:
            parts.append(text)
            oks.append(ok)
            partial = partial or bool(seeds)
    if not parts:
        return missing(*LAC_RESULTS)
    status = ("met on " if all(oks) else "not met on every ") + f"set measured ({len(parts)} of 4)"
    return "; ".join(parts), status + (", fewer than 3 seeds" if partial else "")


def lac_msra(records: Records, goal: float, recall_gain: float) -> Tuple[str, str]:
    """Today's default on MSRA (LAC's vectors: every seed of its runs in [comparison.lac] pooled; before it has
    any, the "lac" row of the side-by-side run) against pretrain_free.cfg, which trained beside its seed 0 (system
    "default" in that run, the default then): test F1 against the goal, unseen-entity recall against the gain."""
    rows = (
        {row["system"]: row for row in figure_rows(records[LAC_MSRA]) if row["dataset"] == "msra"}
        if LAC_MSRA in records
        else {}
    )
    lac, free = lac_default_pooled(records, "msra") or rows.get("lac"), rows.get("default")
    if lac is None or free is None:
        return missing(LAC_MSRA)
    seeds = len(lac["seeds"])
    text = (
        f"{lac['f1']:.2f} (seed{'s' * (seeds > 1)} {', '.join(map(str, lac['seeds']))}; pretrain_free beside seed 0 "
        f"{free['f1']:.2f}; dev {lac['dev_f1']:.2f} against {free['dev_f1']:.2f}); unseen-entity recall "
        f"{lac['r_unseen']:.1f} against {free['r_unseen']:.1f}"
    )
    ok = lac["f1"] >= goal and lac["r_unseen"] - free["r_unseen"] >= recall_gain
    return text, ("met" if ok else "not met") + ("" if seeds >= 3 else f" ({seeds} seed of 3)")


def lac_speed(records: Records, goal: float) -> Tuple[str, str]:
    if LAC_SPEED not in records:
        return missing(LAC_SPEED)
    rows = figure_rows(records[LAC_SPEED])
    text = ", ".join(f"{row['model']} {row['ratio']:.2f}x" for row in rows[1:])
    ok = all(row["ratio"] >= goal for row in rows[1:] if row["model"] == "lac_trained")
    return f"Resume, against {rows[0]['model']}: {text}", "met (default.cfg: lac_trained, float16)" if ok else "not met"


def lac_size(records: Records) -> Tuple[str, str]:
    if LAC_SPEED not in records:
        return missing(LAC_SPEED)
    rows = figure_rows(records[LAC_SPEED])
    text = ", ".join(f"{row['model']} {row['mb']:.1f} MB" for row in rows)
    return (
        text + " (lac_none and lac_trained with float32 vectors; default.cfg, lac_trained in float16, and lac_slwv save"
        " float16)",
        "see sizes",
    )


# ---- the comparison every dataset answers: default, TENER, spaCy's ner ----

# row label: (default, TENER, spaCy's `ner`), each (result, dataset, system) or None
COMPARISON = [
    (row["label"], *(tuple(row[system]) if system in row else None for system in ("default", "tener", "spacy")))
    for row in DATA["comparison"]["rows"]
]
SAMPLED = {row["label"] for row in DATA["comparison"]["rows"] if row.get("sample")}  # train samples: no vectors row
README_ROWS = DATA["comparison"]["readme_rows"]  # the README shows the full sets, MSRA the last of them


def mean_row(rows: List[dict]) -> Optional[dict]:
    """One row of several seeds' rows: the mean F1 (and sample sd) and R-F1; None for no rows."""
    if not rows:
        return None
    f1s = [row["f1"] for row in rows]
    return {
        "f1": statistics.mean(f1s),
        "f1_sd": statistics.stdev(f1s) if len(f1s) > 1 else None,
        "r_f1": statistics.mean(row["r_f1"] for row in rows),
    }


def vectors_row(records: Records, dataset: str) -> Optional[dict]:
    """default.cfg's (with vectors) row of a small set: the mean and sample sd over its seed runs."""
    rows = [row for name in SMALL_VECTORS_SEEDS if (row := dataset_row(records, name, dataset, "vectors"))]
    return {**mean_row(rows), "seeds": [len(rows)]} if rows else None


# MSRA's row of the comparison, after the small full sets (its seeds are one result each).
MSRA_ROW = (DATA["comparison"]["msra_label"], MSRA_DEFAULT, MSRA_FAST, None, MSRA_SPACY)
# configs/default.cfg since 2026-11-28 (LAC's vectors): per comparison label, the runs so far ([result, dataset,
# system] each, their seeds pooled), under [comparison.lac] of bench/questions.toml.
LAC_DEFAULT = {label: [tuple(run) for run in runs] for label, runs in DATA["comparison"].get("lac", {}).items()}


def pooled_seeds(rows: List[dict]) -> dict:
    """Runs' rows of one system pooled: test F1 mean and sd over every seed (a run of several seeds gives each seed's
    F1, f1_per_seed), the seed count and list, and R-F1, dev F1 and unseen-entity recall averaged over the runs, each
    run weighted by its seeds (a run's row holds its seeds' mean)."""
    f1s = [f1 for row in rows for f1 in row.get("f1_per_seed") or [row["f1"]]]
    weights = [len(row.get("seeds") or [0]) for row in rows]

    def weighted(key: str) -> Optional[float]:
        if not all(row.get(key) is not None for row in rows):
            return None
        return sum(row[key] * weight for row, weight in zip(rows, weights)) / sum(weights)

    return {
        "f1": statistics.mean(f1s),
        "f1_sd": statistics.stdev(f1s) if len(f1s) > 1 else None,
        **{key: weighted(key) for key in ("r_f1", "dev_f1", "r_unseen")},
        "n_seeds": len(f1s),
        "seeds": [seed for row in rows for seed in row.get("seeds", [])],
    }


def lac_default_row(records: Records, label: str) -> Optional[dict]:
    """The LAC default's row of a comparison label: its runs pooled (pooled_seeds)."""
    rows = [row for run in LAC_DEFAULT.get(label, []) if (row := dataset_row(records, *run))]
    return pooled_seeds(rows) if rows else None


def comparison(records: Records, n_rows: int = len(COMPARISON) + 1) -> Table:
    columns = [
        "dataset",
        "default: LAC's vectors (seeds so far)",
        "pretrain_free: vectors from the train split (the default until 2026-11-28)",
        "fast.cfg (the default before)",
        "TENER",
        "spaCy `ner`",
        "pretrain_free - spaCy",
        "R-F1 default / pretrain_free / fast / TENER / spaCy",
    ]
    systems_rows = []
    for label, *systems in COMPARISON:
        fast, tener, spacy = (dataset_row(records, *system) if system else None for system in systems)
        free = vectors_row(records, systems[0][1]) if label not in SAMPLED else None  # full train splits only
        systems_rows.append((label, (lac_default_row(records, label), free, fast, tener, spacy)))
    label, *names = MSRA_ROW
    systems_rows.insert(
        README_ROWS - 1,
        (label, (lac_default_row(records, label), *(mean_row(_rows(records, n)) if n else None for n in names))),
    )
    rows = []
    for label, (lac, free, fast, tener, spacy) in systems_rows[:n_rows]:
        lac_text = f"{f1_text(lac)} ({lac['n_seeds']} seed{'s' * (lac['n_seeds'] != 1)})" if lac else ""
        rows.append(
            [
                label,
                lac_text,
                *(f1_text(row) if row else "" for row in (free, fast, tener, spacy)),
                f"{(free or fast)['f1'] - spacy['f1']:+.2f}" if (free or fast) and spacy else "",
                " / ".join(f"{row['r_f1']:.2f}" if row else "-" for row in (lac, free, fast, tener, spacy)),
            ]
        )
    return columns, ["left"] + ["right"] * 7, rows


def comparison_sources() -> List[str]:
    names = [system[0] for _, *systems in COMPARISON for system in systems if system]
    return list(dict.fromkeys(names + [run[0] for runs in LAC_DEFAULT.values() for run in runs]))


def msra_table(records: Records) -> Table:
    """MSRA's configs, one row each, their seed runs pooled (pooled_seeds): spaCy's `ner`, fast.cfg, default.cfg
    before and with its large-corpus rule ([runs] of bench/questions.toml), and today's default (LAC's vectors,
    [comparison.lac])."""
    groups = [
        ("spaCy `ner` (init config -l zh -p ner -o efficiency)", MSRA_SPACY),
        ("fast.cfg (the default until 2026-11-26)", MSRA_FAST),
        ("default.cfg before the large-corpus rule (FGM at every update, 15M tokens)", MSRA_BEFORE),
        ("default.cfg with the rule (FGM every second step, 20M tokens; pretrain_free.cfg since)", MSRA_DEFAULT),
    ]
    runs = [(label, _rows(records, names)) for label, names in groups]
    runs.append(
        (
            "default.cfg since 2026-11-28 (LAC's vectors)",
            [
                row
                for run in LAC_DEFAULT.get(DATA["comparison"]["msra_label"], [])
                if (row := dataset_row(records, *run))
            ],
        )
    )
    cells = []
    for label, rows in runs:
        if not rows:
            continue
        pooled = pooled_seeds(rows)
        mean = lambda key: statistics.mean(row[key] for row in rows)  # noqa: E731
        cells.append(
            [
                label,
                ", ".join(map(str, pooled["seeds"])),
                ", ".join(f"{f1:.2f}" for row in rows for f1 in row.get("f1_per_seed") or [row["f1"]]),
                f1_text(pooled),
                f"{pooled['dev_f1']:.2f}",
                f"{mean('r_seen'):.1f} / {pooled['r_unseen']:.1f}",
                f"{pooled['r_f1']:.2f}",
                f"{mean('training_min'):.1f}",
                f"{mean('chars_per_s'):,.0f}",
            ]
        )
    columns = [
        "config",
        "seeds",
        "test F1 per seed",
        "test F1",
        "dev F1",
        "R seen / unseen",
        "R-F1",
        "training min",
        "chars/s",
    ]
    return columns, ["left", "left", "left", *["right"] * 6], cells


def select_table_finals(records: Records) -> Table:
    """select_table of the finals: the labelled sentences trained from scratch to the stopping rule (the rounds'
    curves are in each select result's own table, in bench/DETAILS.md)."""
    return select_table(records, ("finals",))


def _targets() -> List[Tuple[str, List[Target]]]:
    return [
        (
            group["title"],
            [Target(row["text"], globals()[row["measure"]], row.get("params", {})) for row in group["rows"]],
        )
        for group in DATA.get("targets", [])
    ]


def _questions(entries: Optional[List[dict]] = None) -> List[Question]:
    """The [[questions]] of bench/questions.toml (or entries like them); a headline naming no result of its question
    is refused."""
    entries = DATA["questions"] if entries is None else entries
    for question in entries:
        patterns = [name if isinstance(name, str) else name[0] for name in question["results"]]
        stray = [
            name
            for name in question.get("headline", [])
            if not any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(pattern, name) for pattern in patterns)
        ]
        if stray:
            raise ValueError(
                f"{QUESTIONS_FILE}: question {question['key']!r}'s headline names {', '.join(stray)}, not among its "
                "results"
            )
    return [
        Question(
            question["key"],
            question["title"],
            [(name, "") if isinstance(name, str) else tuple(name) for name in question["results"]],
            question.get("label", ""),
            globals()[question["table"]] if "table" in question else None,
            [tuple(image) for image in question.get("images", [])],
            question.get("pool_seeds", False),
            question.get("headline"),
        )
        for question in entries
    ]


TARGETS = _targets()
QUESTIONS = _questions()


# ---- rendering ----


class Footnotes:
    """A document's footnotes: each long text one, numbered in order, said once (a repeat gets its number)."""

    def __init__(self) -> None:
        self.numbers: Dict[str, int] = {}
        self.pending: List[str] = []

    def mark(self, text: str) -> str:
        """text, or its first words and a footnote mark where it is longer than MAX_CELL."""
        if len(text) <= MAX_CELL:
            return text
        if text not in self.numbers:
            self.numbers[text] = len(self.numbers) + 1
            self.pending.append(f"[^{self.numbers[text]}]: {text}")
        mark = f"[^{self.numbers[text]}]"
        short = _without_first_parenthesis(text)
        if len(short) + len(mark) > MAX_CELL:
            short = short[: MAX_CELL - len(mark) - 1]
            short = short[: max(short.rfind(" "), short.rfind(",") + 1)].rstrip() + "…"  # at a word or a setting
        return short + mark

    def capped(self, table: Table) -> Table:
        columns, align, rows = table
        return [self.mark(c) for c in columns], align, [[self.mark(cell) for cell in row] for row in rows]

    def flush(self) -> List[str]:
        """The footnotes marked since the last flush, to go under the table."""
        lines, self.pending = self.pending, []
        return lines + [""] if lines else []


def _without_first_parenthesis(text: str) -> str:
    """text without its first " (...)" (the footnote says it), or text where it has none."""
    start = text.find(" (")
    if start < 0:
        return text
    depth = 0
    for end in range(start + 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            return text[:start] + text[end + 1 :]
    return text


def source_line(record: dict) -> str:
    """Where a result comes from: command, date, machine, commit, and what was transcribed (a line of
    bench/DETAILS.md: its links are relative to bench/)."""
    version = record["code_version"]
    commit = f"`{version['commit'][:7]}`" if version.get("commit") else "commit unknown"
    if version.get("dirty"):
        commit += " + uncommitted changes"
    command = record["command"] if record["command"] == "not recorded" else f"`{record['command']}`"
    line = f"- {command} · {record['date'][:10]} · {record['machine']['line']} · {commit}"
    source = record.get("transcribed_from")
    if source:
        line += (
            f" · transcribed from [bench/HISTORY.md]({source[len('bench/') :]})"  # DETAILS.md is in bench/
            if source.startswith("bench/HISTORY.md#")
            else f" · transcribed from {source}"
        )
    if record.get("notes"):
        line += f". {_from_bench(record['notes'])}"
    return line


def _from_bench(text: str) -> str:
    """Markdown links written from the repository's root (a result's notes) as bench/DETAILS.md reaches them."""

    def relative(match: "re.Match[str]") -> str:
        target = match.group(1)
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        return "](" + (target[len("bench/") :] if target.startswith("bench/") else "../" + target) + ")"

    return re.sub(r"\]\(([^)\s]+)\)", relative, text)


def record_tables(record: dict) -> List[Table]:
    """A result's tables, rendered from its rows (`table_rows`: one list of {column: value} per table, what
    save_result writes) by the renderer the scripts print with; bench_select's from its curves (select_table)."""
    figures = record.get("figures") or {}
    keys = tuple(key for key in ("curves", "finals") if key in figures)
    if keys and "stop" in figures:
        return [select_table({"select": record}, keys)]
    if "table_rows" in record:
        return [rows_table(rows) for rows in record["table_rows"] if rows]
    return _legacy_tables(record)


def _legacy_tables(record: dict) -> List[Table]:
    """LEGACY: a result saved before save_result took rows (2026-11-28) holds its tables as the cells of the
    Markdown its script printed (`tables`: {"columns", "align", "rows"}), shown as they are: its figures do
    not hold every cell (rounding, units, "**", columns changed across the script's versions), and those files
    are history, not rewritten. A rerun of the script replaces one with rows."""
    return [(table["columns"], table["align"], table["rows"]) for table in record.get("tables", [])]


def _seed_group(model: str) -> str:
    """A student's name without its seed ("patience4000_seed1" -> "patience4000", "seed2" -> "student")."""
    return re.sub(r"_?(seed|s)\d+$", "", model) or "student"


def _span(values: List[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}"


def students_table(record: dict) -> Optional[Table]:
    """A bench_distill result's rows (reference, teacher, students) as one row per student config, its seeds
    pooled: test F1 per seed and their mean, the mean gap to the teacher, the range of the speed ratios over
    the seeds, the teacher's and the reference's test F1 in their own columns (the rows of every model, speed
    included, are in the result's file). None for a result of another script."""
    rows = (record.get("figures") or {}).get("rows") or []
    if not rows or not all("role" in row and "f" in row for row in rows):
        return None
    teacher = next((row for row in rows if row["role"] == "teacher"), None)
    reference = next((row for row in rows if row["role"] == "reference"), None)
    groups: Dict[str, List[dict]] = {}
    for row in rows:
        if row["role"] == "student":
            groups.setdefault(_seed_group(row["model"]), []).append(row)
    columns = [
        "student",
        "seeds",
        "test F1",
        "mean",
        "- teacher",
        "teacher",
        "reference",
        "x reference",
        "x teacher",
        "MB",
    ]
    cells = []
    for group, students in groups.items():
        f1s = [100 * row["f"] for row in students]
        cells.append(
            [
                group,
                str(len(students)),
                ", ".join(f"{f:.2f}" for f in f1s),
                f"{statistics.mean(f1s):.2f}",
                f"{statistics.mean(100 * row['f_minus_teacher'] for row in students):+.2f}",
                f"{teacher['model']} {100 * teacher['f']:.2f}" if teacher else "",
                f"{reference['model']} {100 * reference['f']:.2f}" if reference else "",
                _span([row["ratio"] for row in students]),
                _span([row["ratio_to_teacher"] for row in students]),
                f"{max(row['mb'] for row in students):.1f}",
            ]
        )
    return columns, ["left", "right", "left", *["right"] * 2, "left", "left", *["right"] * 3], cells


SEED_CELL = re.compile(r"^(.*?)[/_]seed(\d+)$")  # "student.cfg+augment5/seed1": one seed's row


def _cell_number(cell: str) -> Optional[Tuple[float, int, str]]:
    """A cell as (value, decimals, unit) ("1,234" -> (1234.0, 0, ""), "99.58%" -> (99.58, 2, "%")); None if it is
    not one number."""
    match = re.fullmatch(r"([+-]?)([\d,]+)(?:\.(\d+))?(%|x)?", cell.strip())
    if not match:
        return None
    sign, whole, decimals, unit = match.groups()
    return float(sign + whole.replace(",", "") + "." + (decimals or "0")), len(decimals or ""), unit or ""


def seed_rows_pooled(table: Table) -> Optional[Table]:
    """A table listing seeds as rows (a cell "NAME/seedN" or "NAME_seedN") as one row per NAME: a "seeds" column
    after it, each number column's mean over the seeds (at the cells' decimals), each text column's values with
    their counts where the seeds differ. None for a table with no such column."""
    columns, align, rows = table
    key = next((i for i in range(len(columns)) if any(SEED_CELL.match(row[i]) for row in rows)), None)
    if key is None:
        return None
    groups: Dict[str, List[List[str]]] = {}
    for row in rows:
        match = SEED_CELL.match(row[key])
        groups.setdefault(match.group(1) if match else row[key], []).append(row)
    cells = []
    for name, members in groups.items():
        row = []
        for i in range(len(columns)):
            values = [member[i] for member in members]
            numbers = [_cell_number(value) for value in values]
            if i == key:
                row += [name, str(len(members))]
            elif len(set(values)) == 1:
                row.append(values[0])
            elif all(numbers):
                decimals, unit = max(n[1] for n in numbers), numbers[0][2]
                mean = statistics.mean(n[0] for n in numbers)
                sign = "+" if values[0].startswith(("+", "-")) else ""  # a signed column stays signed
                row.append(f"{mean:{sign},.{decimals}f}{unit}")
            else:
                counts = {value: values.count(value) for value in values}
                row.append(", ".join(f"{value} ({count})" for value, count in counts.items()))
        cells.append(row)
    return [*columns[: key + 1], "seeds", *columns[key + 1 :]], [*align[: key + 1], "right", *align[key + 1 :]], cells


def result_tables(records: Records, question: Question) -> List[Table]:
    """The first table of each result; tables with the same columns become one, a label column first. A question
    with pool_seeds shows a bench_distill result as students_table does, and another table listing seeds as rows
    as seed_rows_pooled does."""
    tables: List[Table] = []
    for name, label in question.results:
        pooled = students_table(records[name]) if question.pool_seeds and name in records else None
        if question.pool_seeds and name in records and not pooled and record_tables(records[name]):
            pooled = seed_rows_pooled(record_tables(records[name])[0])
        found = [pooled] if pooled else record_tables(records[name]) if name in records else []
        if not found:
            continue
        columns, align, rows = _without_single_seed_column(*found[0])
        if question.label:
            columns, align, rows = [question.label, *columns], ["left", *align], [[label, *row] for row in rows]
        if tables and tables[-1][0] == columns:
            tables[-1][2].extend(rows)
        else:
            tables.append((columns, align, [list(row) for row in rows]))
    return tables


def _without_single_seed_column(columns: List[str], align: List[str], rows: List[List[str]]) -> Table:
    """A table without its "F1 per seed" column when every row is one seed's (the column then repeats
    test F1), so that one-seed runs share a table with runs that never had the column."""
    if "F1 per seed" not in columns:
        return columns, align, rows
    i = columns.index("F1 per seed")
    if any("," in row[i] for row in rows):
        return columns, align, rows
    drop = lambda values: [v for j, v in enumerate(values) if j != i]  # noqa: E731
    return drop(columns), drop(align), [drop(row) for row in rows]


def expand(entries: List[Tuple[str, str]], records: Records) -> List[Tuple[str, str]]:
    """(result name, label) entries with each glob pattern ("lac_finetune_*") replaced by the results it matches,
    in name order, each with the pattern's label; a pattern that matches none stays, as a result not measured
    yet. A name said twice is kept once, where it comes first."""
    found: Dict[str, str] = {}
    for name, label in entries:
        matched = [n for n in sorted(records) if fnmatch.fnmatchcase(n, name)] if any(c in name for c in "*?[") else []
        for match in matched or [name]:
            found.setdefault(match, label)
    return list(found.items())


class Answer(NamedTuple):
    """A question's results, as BENCHMARKS.md shows them."""

    headline: List[Tuple[str, str]]  # current results its tables show: (name, label)
    also: List[str]  # the other current results: one line each under "Also measured"
    earlier: List[str]  # results a later run replaced (superseded_by)
    absent: List[str]  # named, no file yet


def answer(records: Records, question: Question) -> Answer:
    """Its results split: the current ones (not superseded_by a later run) its `headline` names (every current one
    where it has none), the other current ones, the superseded ones, the ones not measured yet."""
    entries = expand(question.results, records)
    current = [(name, label) for name, label in entries if name in records and not records[name].get("superseded_by")]
    wanted = {name for name, _ in current}
    if question.headline is not None:
        wanted = {name for name, _ in current if any(fnmatch.fnmatchcase(name, p) for p in question.headline)}
        replaced = sorted(name for name in question.headline if records.get(name, {}).get("superseded_by"))
        if replaced:
            raise ValueError(
                f"{QUESTIONS_FILE}: question {question.key!r}'s headline names {', '.join(replaced)}, replaced by a "
                f"later run (superseded_by): name {', '.join(latest(records, name) for name in replaced)} instead"
            )
    return Answer(
        [(name, label) for name, label in current if name in wanted],
        [name for name, _ in current if name not in wanted],
        [name for name, _ in entries if records.get(name, {}).get("superseded_by")],
        [name for name, _ in entries if name not in records],
    )


def details_link(name: str, prefix: str = "bench/DETAILS.md") -> str:
    """A link to a result's section of bench/DETAILS.md, named by the result."""
    return f"[`{name}`]({prefix}#result-{name})"


def also_line(records: Records, name: str) -> str:
    """A current result that is not a question's headline in one line: its name (a link to its tables and source
    in bench/DETAILS.md), title and date."""
    record = records[name]
    return f"- {details_link(name)} · {record['title'] or name} · {record['date'][:10]}"


def render_benchmarks(records: Records) -> str:
    notes = Footnotes()
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python bench/report.py` from bench/results/*.json: rerun a bench script or edit a "
        "result there, not this file. -->",
        "",
        "Every number below comes from a file in `bench/results/`, written by the bench script that measured it "
        "(its command, date, machine and commit), or transcribed from the notebook of earlier runs, "
        "[bench/HISTORY.md](bench/HISTORY.md), and saying so. Ratios are measured side by side in one run; the "
        "machines are shared and noisy, so compare numbers across tables with care.",
        "",
        "## Where each target stands",
        "",
    ]
    for title, targets in TARGETS:
        lines += [f"### {title}", ""]
        rows = [[target.text, *target.measure(records, **target.params)] for target in targets]
        lines += markdown_table(notes.capped((["target", "measured", "status"], ["left"] * 3, rows))) + [""]
        lines += notes.flush()
    lines += [
        "## Results, one table per question",
        "",
        'Each question shows the results that answer it today; every other result of it is one line under "Also '
        "measured\". Every result's tables in full, with its command, date, machine, code version and notes, and the "
        "earlier runs a later one replaced: [bench/DETAILS.md](bench/DETAILS.md), question by question.",
        "",
    ]
    placed = set()
    for question in QUESTIONS:
        placed.update(name for name, _ in expand(question.results, records))
        found = answer(records, question)
        tables = (
            [question.table(records)]
            if question.table
            else result_tables(records, question._replace(results=found.headline))
        )
        # The anchor in the heading: an HTML line of its own would need a blank line after it.
        lines += [f'### <a id="{question.key}"></a>{question.title}', ""]
        for table in tables:
            if table[2]:  # a table built from results not measured yet has no rows
                lines += markdown_table(notes.capped(table)) + [""] + notes.flush()
        images = [f"![{caption}]({path})" for caption, path in question.images if (ROOT / path).exists()]
        if images:  # on one line, side by side; an image not made yet is left out
            lines += [" ".join(images), ""]
        footer = f"Each result in full, with its source: [bench/DETAILS.md](bench/DETAILS.md#{question.key})"
        if found.absent:
            footer += f"; not measured yet: {', '.join(f'`bench/results/{name}.json`' for name in found.absent)}"
        if found.earlier:
            footer += "; earlier runs a later one replaced: " + ", ".join(
                f"{details_link(name)} (by `{latest(records, name)}`)" for name in found.earlier
            )
        lines += [footer + (". Also measured:" if found.also else ".")]
        lines += [also_line(records, name) for name in found.also] + [""]
    others = [name for name in records if name not in placed]
    if others:
        lines += ["## Other results", "", "No question in bench/questions.toml names these yet:"]
        lines += [also_line(records, name) for name in others] + [""]
    lines += [
        "Earlier results, the variants tried and why each default is what it is: "
        "[bench/HISTORY.md](bench/HISTORY.md) (the notebook up to 2026-11-26) and the git history of "
        "bench/results/."
    ]
    return "\n".join(lines) + "\n"


def result_section(records: Records, name: str, notes: "Footnotes") -> List[str]:
    """A result's section of bench/DETAILS.md: its title, the result replacing it (superseded_by), all its tables
    and where it comes from."""
    record = records[name]
    lines = [f'<a id="result-{name}"></a>', "", f"### {record['title'] or name} (`{name}`)", ""]
    if record.get("superseded_by"):
        newer = latest(records, name)
        lines += [f"Replaced by {details_link(newer, '')} ({records[newer]['date'][:10]}).", ""]
    for table in record_tables(record):
        if table[2]:
            lines += markdown_table(notes.capped(table)) + [""] + notes.flush()
    return lines + [source_line(record), ""]


def render_details(records: Records) -> str:
    """bench/DETAILS.md: per question, every result's tables and source line (a result two questions name is in full
    under the later one), then its earlier runs; then any result no question names."""
    notes = Footnotes()
    home = {name: question.key for question in QUESTIONS for name, _ in expand(question.results, records)}
    lines = [
        "# Benchmarks in full",
        "",
        "<!-- Generated by `python bench/report.py` from bench/results/*.json: rerun a bench script or edit a "
        "result there, not this file. -->",
        "",
        "Every result of [BENCHMARKS.md](../BENCHMARKS.md), question by question: all of its tables, its command, "
        "date, machine, code version and notes; then the earlier runs a later one replaced (their files stay).",
        "",
    ]
    for question in QUESTIONS:
        found = answer(records, question)
        lines += [f'<a id="{question.key}"></a>', "", f"## {question.title}", ""]
        lines += [f"Its answer today: [BENCHMARKS.md](../BENCHMARKS.md#{question.key}).", ""]
        current = [name for name, _ in found.headline] + found.also
        for group, names in (("", current), ("Earlier runs, replaced by a later run:", found.earlier)):
            if names and group:
                lines += [group, ""]
            for name in names:
                if home[name] == question.key:
                    lines += result_section(records, name, notes)
                else:
                    lines += [f"- {details_link(name, '')}: in full under a later question.", ""]
        if found.absent:
            lines += [f"Not measured yet: {', '.join(f'`bench/results/{name}.json`' for name in found.absent)}", ""]
    others = [name for name in records if name not in home]
    if others:
        lines += ["## Other results (no question in bench/questions.toml names them yet)", ""]
        for name in others:
            lines += result_section(records, name, notes)
    return "\n".join(lines).rstrip("\n") + "\n"


def render_readme_table(records: Records) -> str:
    sources = ", ".join(
        f"`{name}`"
        for name in dict.fromkeys(
            [system[0] for _, *systems in COMPARISON[: README_ROWS - 1] for system in systems if system]
            + list(SMALL_VECTORS_SEEDS)
            + [name for names in MSRA_ROW[1:] if names for name, _ in names]
            + [
                run[0]
                for label, runs in LAC_DEFAULT.items()
                for run in runs
                if label in [row[0] for row in COMPARISON[: README_ROWS - 1]] + [MSRA_ROW[0]]
            ]
        )
    )
    lines = [
        README_MARKERS[0],
        *markdown_table(comparison(records, README_ROWS)),
        "",
        f"(Rendered by `python bench/report.py` from bench/results/: {sources}.)",
        README_MARKERS[1],
    ]
    return "\n".join(lines)


def updated_readme(text: str, records: Records) -> str:
    start, end = (text.find(marker) for marker in README_MARKERS)
    if start < 0 or end < start:
        raise ValueError(
            f"README.md has no {README_MARKERS[0]} ... {README_MARKERS[1]} pair: put the two markers "
            "where the results table goes (in the Benchmarks section)"
        )
    return text[:start] + render_readme_table(records) + text[end + len(README_MARKERS[1]) :]


def load_records(folder: Path = RESULTS) -> Records:
    records = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf8"))
        if record.get("name") != path.stem:
            raise ValueError(f"{path}: its name is {record.get('name')!r}, expected {path.stem!r} (the file's name)")
        records[path.stem] = record
    check_superseded(records, folder)
    return records


def check_superseded(records: Records, folder: Path = RESULTS) -> None:
    """Each "superseded_by" names another result, run no earlier, and following them never loops."""
    for name, record in records.items():
        newer = record.get("superseded_by")
        if newer is None:
            continue
        where = f"{folder / name}.json: superseded_by {newer!r}"
        if not isinstance(newer, str) or newer not in records or newer == name:
            raise ValueError(f"{where} names no other result in {folder}")
        if records[newer]["date"] < record["date"]:
            raise ValueError(f"{where} ran before it ({records[newer]['date'][:10]} < {record['date'][:10]})")
        seen = [name]
        while newer is not None:
            if newer in seen:
                raise ValueError(f"{where}: the chain loops ({' -> '.join(seen + [newer])})")
            seen.append(newer)
            newer = records[newer].get("superseded_by")


def latest(records: Records, name: str) -> str:
    """The result that replaces name in the end (name itself where nothing does)."""
    while records[name].get("superseded_by"):
        name = records[name]["superseded_by"]
    return name


def earlier_line(records: Records, name: str) -> str:
    """A superseded result in one line: its name, date and commit, and the result that replaces it."""
    record = records[name]
    commit = (record["code_version"].get("commit") or "commit unknown")[:7]
    newer = latest(records, name)
    return f"- `{name}` · {record['date'][:10]} · `{commit}` · replaced by `{newer}` ({records[newer]['date'][:10]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs from what would be written")
    args = parser.parse_args()
    records = load_records()
    benchmarks = render_benchmarks(records)
    n_lines = benchmarks.count("\n")
    readme = updated_readme(README.read_text(encoding="utf8"), records)
    files = ((BENCHMARKS, benchmarks), (DETAILS, render_details(records)), (README, readme))
    stale = [path for path, text in files if not path.exists() or path.read_text(encoding="utf8") != text]
    names = " and ".join(path.relative_to(ROOT).as_posix() for path in stale)
    if args.check:
        if stale:
            verb = "differ" if len(stale) > 1 else "differs"
            sys.exit(f"{names} {verb} from bench/results/*.json: run `python bench/report.py`")
        return
    for path, text in files:
        if path in stale:  # the README is read and written at once: other sections stay as they are
            path.write_text(text, encoding="utf8")
    print(f"BENCHMARKS.md: {n_lines} lines; rewrote {names or 'nothing'}", file=sys.stderr)


if __name__ == "__main__":
    main()
