"""Issue 80's ablation in one table: every LAC system against the default on every set, each seed that ran.

Usage: python bench/lac_ablation.py [--sources lac_finetune_resume_seed0 ...] [--result lac_finetune_ablation]

Reads bench/results (bench_datasets.py's rows, nothing is trained or scored here) and pools, for each dataset and
system, the seeds of every source that has it: dev F1, unseen-entity recall and training minutes as means over the
seeds, test F1 as the mean and sample standard deviation of the seeds' own, and the speed as the ratio of the system's
chars/s to the default's measured in the same run (sources ran on different machines and loads, so their chars/s are
not comparable; their ratios are), averaged over the sources. The frozen LAC (a), lac_context, comes from the lac
question's runs, whose own default seeds are left out (the default's seeds come from this issue's runs only: the same
seed trained twice would count twice).
"""

import argparse
import json
import statistics
from collections import defaultdict
from typing import Dict, List

from _common import RESULTS, Section, add_result_argument, publish

# Issue 80's runs (every system), then the frozen lac_context's (its rows only).
SOURCES = [
    "lac_finetune_resume_seed0",
    "lac_finetune_resume_seeds12",
    "lac_finetune_msra_seed0",
    "lac_finetune_ecommerce_seed0",
    "lac_finetune_ecommerce_seeds12",
    "lac_finetune_youku_seed0",
    "lac_finetune_youku_seeds12",
    "lac_finetune_taobao_seed0",
    "lac_finetune_taobao_lr01_seeds12",
]
# Runs without the default, each with the runs whose default its deltas are over (the same set and seeds).
LEVER_SOURCES = {
    "lac_finetune_youku_levers_seed0": ["lac_finetune_youku_seed0", "lac_finetune_youku_seeds12"],
    "lac_finetune_youku_lr01_seeds12": ["lac_finetune_youku_seed0", "lac_finetune_youku_seeds12"],
    "lac_finetune_ecommerce_lr01_seeds012": ["lac_finetune_ecommerce_seed0", "lac_finetune_ecommerce_seeds12"],
    "lac_finetune_taobao_lr01_seed0": ["lac_finetune_taobao_seed0", "lac_finetune_taobao_lr01_seeds12"],
    "lac_finetune_resume_lr01": ["lac_finetune_resume_seed0", "lac_finetune_resume_seeds12"],
    "lac_finetune_msra_8m_seeds01": ["lac_msra_seed0", "lac_msra_seeds12"],
    "lac_finetune_resume_be_seed1": ["lac_finetune_resume_seed0", "lac_finetune_resume_seeds12"],
    "default_msra_8m_seeds01": ["lac_msra_seed0", "lac_msra_seeds12"],
    "lac_finetune_resume_de_seed1": ["lac_finetune_resume_seed0", "lac_finetune_resume_seeds12"],
    "lac_finetune_ecommerce_bce_seed0": ["lac_finetune_ecommerce_seed0", "lac_finetune_ecommerce_seeds12"],
    "lac_finetune_ecommerce_bcde_seed1": ["lac_finetune_ecommerce_seed0", "lac_finetune_ecommerce_seeds12"],
    "lac_finetune_ecommerce_bcde_seed2": ["lac_finetune_ecommerce_seed0", "lac_finetune_ecommerce_seeds12"],
    "lac_finetune_youku_bce_seed0": ["lac_finetune_youku_seed0", "lac_finetune_youku_seeds12"],
    "lac_finetune_youku_bc_seed1": ["lac_finetune_youku_seed0", "lac_finetune_youku_seeds12"],
    "lac_finetune_taobao_bcde_seed0": ["lac_finetune_taobao_seed0", "lac_finetune_taobao_lr01_seeds12"],
    "lac_finetune_youku_d_seed1": ["lac_finetune_youku_seed0", "lac_finetune_youku_seeds12"],
    "lac_finetune_taobao_bc_seed1": ["lac_finetune_taobao_seed0", "lac_finetune_taobao_lr01_seeds12"],
}
# Runs whose training minutes say nothing of the configs (stopped, or beside more than a second training): their
# seeds count in every column but the minutes (each result's notes say why).
UNTIMED = {
    "lac_finetune_resume_be_seed1",
    "default_msra_8m_seeds01",
    "lac_finetune_youku_bce_seed0",
    "lac_finetune_taobao_bcde_seed0",
    "lac_finetune_ecommerce_bcde_seed2",
}
# The frozen LAC's runs, each with the runs of the default it was compared with (the same code, days before
# this runs): the deltas of (a) are against those.
FROZEN_SOURCES = {
    "lac_context_resume_seeds012": [],
    "lac_context_msra_seed0": ["lac_msra_seed0", "lac_msra_seeds12"],
    "lac_context_ecommerce_seeds012": ["lac_full_seeds012"],
    "lac_context_youku_seeds012": ["lac_full_seeds012"],
    "lac_context_taobao_seeds01": ["lac_full_seeds012"],
}
# The levers' runs (bench_datasets --variant over lac_context_finetune): their system column's start.
LEVER = "lac_context_finetune + components.crf_ner.model.tok2vec.lac_features."
# The ablation's letters (issue 80, item 5), in its order.
SYSTEMS = {
    "default": "default.cfg",
    "lac_context": "(a) LAC frozen beside the default's inputs",
    "lac_finetune": "(b) LAC fine-tuned -> BiLSTM -> CRF",
    "lac_finetune_df": "(c) (b) + dynamic fusion",
    "lac_finetune_df_at": "(d) (c) + FGM",
    "lac_lebert": "(e) (d) + LEBERT's adapter after layer 1",
    "lac_context_finetune": "(f) (d)'s LAC fine-tuned beside the default's inputs, at 0.5 (the config's until 12-03)",
    LEVER + "learn_rate_scale=0.1": "(f) at learn_rate_scale 0.1 (the config's since 12-03)",
    LEVER + "frozen_layers=1": "(f) with LAC's embeddings frozen (frozen_layers 1)",
    "lac_context_finetune + training.max_epochs.large_tokens=8000000": "(f) (at 0.1) in 4 epochs (8M tokens), not 10",
    "default + training.max_epochs.large_tokens=8000000": "default.cfg in 4 epochs (8M tokens), as (f)'s above",
}


def short_name(system: str) -> str:
    """bench_datasets' system column to its config's name ("spacy-cner default.cfg (...)" -> "default")."""
    first = system.split()[0]
    first = "default" if first == "spacy-cner" else first
    if " + " in system:  # a --variant: its base config and overrides ("lac_context_finetune + section.key=value")
        return f"{first} + {system.split(' + ', 1)[1]}"
    return first


def source_rows(name: str) -> List[dict]:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return []
    return [row for table in json.loads(path.read_text(encoding="utf8"))["table_rows"] for row in table]


def default_means(rows: List[dict]) -> Dict[str, tuple]:
    """dataset -> (dev F1, test F1, chars/s, unseen recall) of the default over the rows' seeds (weighted by them)."""
    seeds: Dict[str, list] = defaultdict(list)
    for row in rows:
        if short_name(row["system"]) == "default":
            per_seed = row.get("F1 per seed") or [row["test F1"]]
            unseen = row["R seen / unseen"][1]
            seeds[row["dataset"]] += [(row["dev F1"], f1, row["chars/s"], unseen) for f1 in per_seed]
    return {dataset: tuple(statistics.mean(column) for column in zip(*values)) for dataset, values in seeds.items()}


def pool(
    sources: List[str], frozen_sources: Dict[str, List[str]], lever_sources: Dict[str, List[str]]
) -> Dict[tuple, dict]:
    """(dataset, system) -> the pooled seeds: dev, unseen recall and minutes weighted by seeds, test F1 per seed,
    and per seed the dev and test F1 over the default of the same run (or, for the frozen LAC, of the runs it
    was compared with) and each source's chars/s ratio to that default."""
    pooled: Dict[tuple, dict] = defaultdict(
        lambda: {
            "dev": [],
            "test": [],
            "unseen": [],
            "minutes": [],
            "ratio": [],
            "dev_gain": [],
            "test_gain": [],
            "unseen_gain": [],
        }
    )
    plan = [(name, [name], False) for name in sources]
    plan += [(name, references, False) for name, references in lever_sources.items()]
    plan += [(name, references, True) for name, references in frozen_sources.items()]
    for name, references, frozen in plan:
        rows = source_rows(name)
        defaults = default_means([row for reference in references for row in source_rows(reference)])
        for row in rows:
            system = short_name(row["system"])
            if system not in SYSTEMS or frozen != (system == "lac_context"):
                continue
            seeds = row.get("F1 per seed") or [row["test F1"]]
            entry = pooled[row["dataset"], system]
            entry["test"] += seeds
            entry["dev"] += [row["dev F1"]] * len(seeds)
            entry["unseen"] += [row["R seen / unseen"][1]] * len(seeds)
            if name not in UNTIMED:
                entry["minutes"] += [row["training min"]] * len(seeds)
            if row["dataset"] in defaults and system != "default":
                dev, test, speed, unseen = defaults[row["dataset"]]
                entry["dev_gain"] += [row["dev F1"] - dev] * len(seeds)
                entry["unseen_gain"] += [row["R seen / unseen"][1] - unseen] * len(seeds)
                entry["test_gain"] += [f1 - test for f1 in seeds]
                if references == [name]:  # chars/s measured side by side in the same run only
                    entry["ratio"].append(row["chars/s"] / speed)
            entry.setdefault("sources", []).append(name)
    return pooled


def render(pooled: Dict[tuple, dict]) -> List[dict]:
    order = list(SYSTEMS)
    rows = []
    for dataset, system in sorted(pooled, key=lambda key: (key[0], order.index(key[1]))):
        entry = pooled[dataset, system]
        test = entry["test"]
        rows.append(
            {
                "dataset": dataset,
                "system": SYSTEMS[system],
                "config": system,
                "seeds": len(test),
                "dev F1": round(statistics.mean(entry["dev"]), 2),
                "test F1": round(statistics.mean(test), 2),
                "test F1 sd": round(statistics.stdev(test), 2) if len(test) > 1 else None,
                "F1 per seed": test,
                "dev - default": round(statistics.mean(entry["dev_gain"]), 2) if entry["dev_gain"] else None,
                "test - default": round(statistics.mean(entry["test_gain"]), 2) if entry["test_gain"] else None,
                "unseen R": round(statistics.mean(entry["unseen"]), 1),
                "unseen R - default": round(statistics.mean(entry["unseen_gain"]), 1) if entry["unseen_gain"] else None,
                "training min": round(statistics.mean(entry["minutes"]), 1) if entry["minutes"] else None,
                "x default chars/s": round(statistics.mean(entry["ratio"]), 2) if entry["ratio"] else None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", nargs="+", default=SOURCES)
    add_result_argument(parser, "lac_finetune_ablation")
    args = parser.parse_args()
    pooled = pool(args.sources, FROZEN_SOURCES, LEVER_SOURCES)
    rows = render(pooled)
    read = sorted({name for entry in pooled.values() for name in entry["sources"]})
    notes = (
        "Test F1 of the model chosen on dev: the mean of every seed that ran (then the seeds' own, in the sources' "
        "order); dev F1, unseen-entity recall and training minutes: means over the seeds; x default chars/s: the "
        "system's chars/s over the default's in the same run, averaged over the runs; dev, test and unseen R - "
        "default: over the default of the same run (the frozen LAC's: over the default of the runs it was compared "
        "with, the same code days earlier: lac_full_seeds012 and lac_msra_seed0/seeds12; none for Resume's; the "
        "levers' runs (the variants of (f)): over the default of the same set's runs of this issue), the "
        "mean over the seeds; training minutes leave out " + ", ".join(sorted(UNTIMED)) + " (stopped, or beside "
        "more than one other job: their notes). Sources: "
        + ", ".join(read)
        + " (each with its machine and load in bench/DETAILS.md)."
    )
    publish(
        args.result,
        {"pooled": {f"{d}/{s}": v for (d, s), v in pooled.items()}},
        Section(
            "Issue 80's ablation: every LAC system against the default, each set, every seed that ran", notes, [rows]
        ),
    )


if __name__ == "__main__":
    main()
