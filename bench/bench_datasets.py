"""Every dataset at once: our configs vs spaCy's `ner`, 3 seeds, accuracy, robustness and speed.

Usage: python bench/bench_datasets.py [--data ../shared/data] [--out bench/runs/datasets]
       [--datasets resume ecommerce youku taobao peoples_daily msra] [--systems default bilstm tener spacy]
       [--seeds 0 1 2] [--jobs 2] [--max-steps N] [--result NAME]
       [--variant NAME=SYSTEM:section.key=value,...] [--config NAME=PATH] [--train-sentences N] [--dev-sentences N]

Each dataset with a train split is converted with our converter (repairs counted; People's
Daily, whose train file is missing, trains on its dev file and splits its test file into dev
and test: a small newswire set with sentence ends), and
dev/test sentences whose text occurs in train are removed (Taobao repeats many; the
counts are printed and reported). Every system trains on the same split once per seed,
the best model chosen on dev, and is scored on test: P/R/F1, then sentence-level
robustness (R-F1 and Asr, adjacent pairs, `python -m spacy_cner robustness`), and the
inference chars/s of the first seed's models (one process per dataset, systems alternating).
Choose defaults on dev scores across all datasets at once, never per dataset: the table
gives the dev F1 of each model-best next to the test scores. A variant is a system with
config overrides, e.g. --variant default_sent=default:components.crf_ner.model.sentence_encoding=true
(a JSON value may hold commas:
--variant fgm=default:components.crf_ner.adversarial={"@misc":"spacy-cner.fgm.v1","epsilon":0.5}).
--config NAME=PATH adds a config file of one's own as a system (a candidate before it becomes
configs/default.cfg). --systems takes variant and --config names too, and runs them in its order.
--train-sentences and --dev-sentences keep a random sample (fixed, the same for every system) of
that many train and dev sentences, to see how a system does on a small corpus such as Weibo's
1,350 train and 270 dev sentences; test is kept whole.
"""

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from _common import (
    ROOT,
    SYSTEMS,
    Section,
    add_data_argument,
    add_out_argument,
    add_result_argument,
    evaluate,
    publish,
    run,
    run_all,
    spacy_ner_config,
    split_settings,
    train,
)

# name: (train, dev, test file names, convert arguments)
DATASETS = {
    "resume": (("train.char.bmes", "dev.char.bmes", "test.char.bmes"), ["--scheme", "bmes", "--repair"]),
    "ecommerce": (("train.txt.bieos", "dev.txt.bieos", "test.txt.bieos"), ["--repair"]),
    "youku": (("train.txt", "dev.txt", "test.txt"), []),
    "taobao": (("train.txt", "dev.txt", "test.txt"), []),
    # Newswire with sentence ends, as the held-out MSRA set; its train file is missing (SOURCE.md), so
    # it trains on example.dev, and example.test gives dev (its first DEV_FROM_TEST sentences) and test.
    "peoples_daily": (("example.dev", "example.test", "example.test"), ["--scheme", "bio"]),
    # Newswire at scale (42k train sentences, NR/NS/NT). People's Daily's sentences are MSRA train/dev
    # sentences (SOURCE.md): the two are only ever scored on their own splits here.
    "msra": (("train.char.bmes", "dev.char.bmes", "test.char.bmes"), ["--scheme", "bmes"]),
}
# Datasets whose dev and test come from one file: dev is its first this many sentences, test the rest.
DEV_FROM_TEST = {"peoples_daily": 700}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    add_out_argument(parser, "datasets")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument(
        "--systems", nargs="+", default=None, help=f"of {list(SYSTEMS)} (default: all of them, then the variants)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument(
        "--one-thread",
        action="store_true",
        help="one thread per training with --jobs 1 too (beside another benchmark on the other core)",
    )
    parser.add_argument("--max-steps", type=int, default=0, help="0: the configs' own stopping rules")
    parser.add_argument("--repeats", type=int, default=3, help="inference passes over test per model")
    add_result_argument(parser, None)
    parser.add_argument("--variant", action="append", default=[], help="NAME=SYSTEM:section.key=value,...")
    parser.add_argument("--config", action="append", default=[], help="NAME=PATH: a config file as a system")
    parser.add_argument(
        "--finished-only",
        action="store_true",
        help="train nothing: score the trainings already finished under --out, each system over its "
        "finished seeds (systems and datasets with none left out)",
    )
    parser.add_argument("--train-sentences", type=int, default=0, help="keep a random sample of this many (0: all)")
    parser.add_argument("--dev-sentences", type=int, default=0, help="keep a random sample of this many (0: all)")
    args = parser.parse_args()
    for spec in args.config:
        name, _, path = spec.partition("=")
        if not name or name in SYSTEMS or not Path(path).is_file():
            sys.exit(f"Bad --config {spec!r}: expected NAME=PATH with a new NAME and an existing config file")
        SYSTEMS[name] = (f"{name} ({path})", str(Path(path).resolve()))
    variant_names = [variant.partition("=")[0] for variant in args.variant]
    unknown = [key for key in args.systems or [] if key not in SYSTEMS and key not in variant_names]
    if unknown:
        sys.exit(f"Unknown --systems {unknown}: choose from {list(SYSTEMS)} or a --variant's NAME")
    requested = args.systems or [*SYSTEMS, *variant_names]
    overrides = {key: [] for key in requested if key in SYSTEMS}
    for variant in args.variant:
        name, _, spec = variant.partition("=")
        base, _, settings = spec.partition(":")
        if not name or base not in SYSTEMS or name in SYSTEMS:
            sys.exit(
                f"Bad --variant {variant!r}: expected NAME=SYSTEM:section.key=value,... with SYSTEM one of "
                f"{list(SYSTEMS)}"
            )
        SYSTEMS[name] = (f"{SYSTEMS[base][0]} + {settings}", SYSTEMS[base][1])
        overrides[name] = [f"--{setting}" for setting in split_settings(settings)]
    args.systems = requested  # in the order asked for; no --systems: every system, then the variants
    missing = [name for name in args.datasets if not (args.data / name / DATASETS[name][0][0]).exists()]
    if missing:
        sys.exit(f"No data for {', '.join(missing)} in {args.data}: pass --data DIR (see each SOURCE.md)")
    sample = {"train": args.train_sentences, "dev": args.dev_sentences}
    corpora = {
        name: prepare(
            args.data / name,
            args.out / name / "corpus",
            *DATASETS[name],
            sample=sample,
            dev_from_test=DEV_FROM_TEST.get(name, 0),
        )
        for name in args.datasets
    }
    configs = {
        key: ROOT / "configs" / SYSTEMS[key][1] if SYSTEMS[key][1] else spacy_ner_config(args.out / "spacy_ner.cfg")
        for key in args.systems
    }
    runs = [(name, key, seed) for seed in args.seeds for name in args.datasets for key in args.systems]
    if args.finished_only:
        runs = [
            (name, key, seed)
            for name, key, seed in runs
            if (args.out / name / key / f"seed{seed}" / "training_stats.json").exists()
        ]

    def train_run(run_key: tuple) -> dict:
        name, key, seed = run_key
        out = args.out / name / key / f"seed{seed}"
        stats_path = out / "training_stats.json"
        if not stats_path.exists():
            out.mkdir(parents=True, exist_ok=True)
            extra, vectors_seconds = tuple(overrides[key]), 0.0
            if reads_own_vectors(configs[key], extra):
                vectors_seconds = train_own_vectors(corpora[name]["path"] / "train.spacy", out / "vectors", seed)
                extra += (f"--paths.vectors={out / 'vectors'}",)
            stats = train(
                configs[key],
                corpora[name]["path"],
                out,
                seed,
                args.max_steps,
                args.jobs > 1 or args.one_thread,
                extra=extra,
            )
            # The vectors are part of the system: their training counts in its training time.
            stats.update(seconds=stats["seconds"] + vectors_seconds, vectors_seconds=vectors_seconds)
            stats_path.write_text(json.dumps(stats), encoding="utf8")
        return json.loads(stats_path.read_text(encoding="utf8"))

    training = run_all(train_run, runs, args.jobs)
    results = {}
    for name in args.datasets:
        models = {
            f"{key}/seed{seed}": args.out / name / key / f"seed{seed}" / "model-best"
            for key in args.systems
            for seed in args.seeds
            if (name, key, seed) in training
        }
        if not models:
            continue
        speed_models = [
            f"{key}/seed{seeds_of(training, name, key)[0]}" for key in args.systems if seeds_of(training, name, key)
        ]
        scores = evaluate(
            {k: str(p) for k, p in models.items()},
            speed_models,
            corpora[name]["path"],
            args.repeats,
            one_thread=True,
            seen_recall=True,
        )
        for model_key, path in models.items():
            metrics = robustness_score(path.parent, corpora[name]["path"], reuse=True)
            dev_f = json.loads((path / "meta.json").read_text(encoding="utf8"))["performance"]["ents_f"]
            scores[model_key].update(robust=metrics["robust"]["f"], asr=metrics["attack_success_rate"], dev_f=dev_f)
        results[name] = scores
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "scores": results,
                "corpora": corpora,
                "training": {"/".join(map(str, k)): v for k, v in training.items()},
            },
            indent=2,
            default=str,
        ),
        encoding="utf8",
    )
    rows = summary(results, training, args)
    counts = {name: {k: v for k, v in c.items() if k != "path"} for name, c in corpora.items()}
    figures = {"rows": rows, "corpora": counts, "max_steps": args.max_steps, "scores": results}
    publish(args.result or result_name(args), figures, render(rows, corpora, args))


def robustness_score(system_dir: Path, corpus: Path, reuse: bool) -> dict:
    """`python -m spacy_cner robustness` on a run's model-best: its metrics.json (kept with reuse when newer
    than the model)."""
    output = system_dir / "robustness"
    metrics = output / "metrics.json"
    if reuse and metrics.exists() and metrics.stat().st_mtime > (system_dir / "model-best").stat().st_mtime:
        return json.loads(metrics.read_text(encoding="utf8"))
    run(
        [
            sys.executable,
            "-m",
            "spacy_cner",
            "robustness",
            str(system_dir / "model-best"),
            str(corpus / "test.spacy"),
            "--output",
            str(output),
        ],
        quiet=True,
    )
    return json.loads(metrics.read_text(encoding="utf8"))


def seeds_of(training: dict, name: str, key: str) -> list:
    """The seeds of a dataset's system that were trained (all of --seeds, unless --finished-only left some out)."""
    return sorted(seed for dataset, system, seed in training if (dataset, system) == (name, key))


def result_name(args: argparse.Namespace) -> str:
    """The default --result: what was run, so that a rerun of the same question replaces its file."""
    parts = ["datasets", "-".join(args.datasets), "-".join(args.systems)]
    if args.train_sentences or args.dev_sentences:
        parts.append(f"sample{args.train_sentences}-{args.dev_sentences}")
    if args.max_steps:
        parts.append(f"steps{args.max_steps}")
    if args.seeds != [0, 1, 2]:
        parts.append("seed" + "-".join(map(str, args.seeds)))
    return "_".join(parts)


def reads_own_vectors(config: Path, extra: tuple) -> bool:
    """Whether a system reads vectors (static_vectors = true) and no --paths.vectors override names them:
    it then reads vectors trained on its own train split, as configs/default.cfg does at initialize."""
    text = config.read_text(encoding="utf8")
    static = any(o.endswith("static_vectors=true") for o in extra) or (
        "static_vectors = true" in text and not any(o.endswith("static_vectors=false") for o in extra)
    )
    # A config whose [initialize.before_init] brings pretrained vectors (spacy-cner.lac_vectors.v1) reads those.
    brings_own = "spacy-cner.lac_vectors" in text
    return static and not brings_own and not any(o.startswith("--paths.vectors=") for o in extra)


def train_own_vectors(train: Path, out: Path, seed: int) -> float:
    """`python -m spacy_cner train-vectors` on the train split (one thread, this seed); returns its wall time."""
    start = time.perf_counter()
    run(
        [sys.executable, "-m", "spacy_cner", "train-vectors", str(train), str(out), "--seed", str(seed)],
        quiet=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )
    return time.perf_counter() - start


def prepare(
    data: Path, corpus: Path, files: tuple, convert_args: list, sample: dict = None, dev_from_test: int = 0
) -> dict:
    """Convert a dataset's splits and drop dev/test docs whose text occurs in train; the counts.

    sample: split -> number of docs to keep (a random sample in corpus order; 0 keeps all). Dev
    and test are deduplicated against the whole train split, so test is the same at every size.
    dev_from_test: when dev and test are one file, dev is its first this many docs and test the rest.
    """
    sample = sample or {}
    import spacy
    from spacy.tokens import DocBin

    corpus.mkdir(parents=True, exist_ok=True)
    for split, name in zip(("train", "dev", "test"), files):
        if not (corpus / f"{split}.all.spacy").exists():
            run(
                [
                    sys.executable,
                    "-m",
                    "spacy_cner",
                    "convert",
                    str(data / name),
                    str(corpus / f"{split}.all.spacy"),
                    *convert_args,
                ],
                quiet=True,
            )
    nlp = spacy.blank("zh")
    train_docs = list(DocBin().from_disk(corpus / "train.all.spacy").get_docs(nlp.vocab))
    seen = {doc.text for doc in train_docs}
    counts = {"train_all": len(train_docs)}
    train_docs = _sample(train_docs, sample.get("train", 0))
    _write(train_docs, corpus / "train.spacy")
    counts["train"] = len(train_docs)
    for split in ("dev", "test"):
        docs = list(DocBin().from_disk(corpus / f"{split}.all.spacy").get_docs(nlp.vocab))
        if dev_from_test:
            docs = docs[:dev_from_test] if split == "dev" else docs[dev_from_test:]
        kept = [doc for doc in docs if doc.text not in seen]
        counts[f"{split}_removed"] = len(docs) - len(kept)
        counts[f"{split}_all"] = len(kept)
        kept = _sample(kept, sample.get(split, 0))
        _write(kept, corpus / f"{split}.spacy")
        counts[split] = len(kept)
    return {"path": corpus, **counts}


def _write(docs: list, path: Path) -> None:
    """Write a .spacy file in one step (a temporary file renamed): another benchmark training on the
    same corpus reads it at every epoch, and another benchmark may be writing it too (each writer its
    own temporary file)."""
    from spacy.tokens import DocBin

    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    DocBin(docs=docs).to_disk(temporary)
    os.replace(temporary, path)


def _sample(docs: list, n: int) -> list:
    """n of docs at random (seed 0), in their order; all of them when n is 0 or too large."""
    if not n or n >= len(docs):
        return docs
    return [docs[i] for i in sorted(random.Random(0).sample(range(len(docs)), n))]


def summary(results: dict, training: dict, args: argparse.Namespace) -> list:
    """A row per dataset and system: the means over seeds that the table shows (in percent; F1 with its
    sample standard deviation and each seed's), the mean training minutes and the first seed's chars/s."""
    rows = []
    for name in args.datasets:
        for key in args.systems:
            seeds = seeds_of(training, name, key)
            if not seeds:
                continue
            per_seed = [results[name][f"{key}/seed{seed}"] for seed in seeds]
            f1 = [s["f"] * 100 for s in per_seed]
            seconds = statistics.mean(training[(name, key, seed)]["seconds"] for seed in seeds)
            rows.append(
                {
                    "dataset": name,
                    "system": key,
                    "name": SYSTEMS[key][0],
                    "seeds": seeds,
                    "dev_f1": statistics.mean(s["dev_f"] for s in per_seed) * 100,
                    "p": statistics.mean(s["p"] for s in per_seed) * 100,
                    "r": statistics.mean(s["r"] for s in per_seed) * 100,
                    "r_seen": statistics.mean(s["r_seen"] for s in per_seed) * 100,
                    "r_unseen": statistics.mean(s["r_unseen"] for s in per_seed) * 100,
                    "f1": statistics.mean(f1),
                    "f1_sd": statistics.stdev(f1) if len(f1) > 1 else None,
                    "f1_per_seed": f1,
                    "r_f1": statistics.mean(s["robust"] for s in per_seed) * 100,
                    "asr": statistics.mean(s["asr"] for s in per_seed) * 100,
                    "training_min": seconds / 60,
                    "chars_per_s": results[name][f"{key}/seed{seeds[0]}"]["chars_per_s"],
                    "n_seen": per_seed[0]["n_seen"],
                    "n_unseen": per_seed[0]["n_unseen"],
                }
            )
    return rows


def render(rows: list, corpora: dict, args: argparse.Namespace) -> Section:
    """The table's rows (means over seeds, in percent) and the notes saying how they were measured."""
    steps = f"at most {args.max_steps} steps" if args.max_steps else "the configs' own stopping rules"
    notes = (
        f"Seeds {', '.join(map(str, args.seeds))}; {steps}; {args.jobs} trainings at a time"
        f"{', one thread each' if args.jobs > 1 or args.one_thread else ''}. Test split, model chosen on dev; "
        "P, R, F1, R-F1 and Asr are means over seeds (F1 with the sample standard deviation, then per seed); "
        f"training time is the mean wall time; inference: the seed-{args.seeds[0]} model on one thread, "
        "nlp.pipe(batch_size=256) over test, best of "
        f"{args.repeats}, the systems alternating. R seen / unseen: the recall of the test entities whose text "
        "and label occur as an entity in train, and of the others ("
        + "; ".join(f"{name} {_seen_counts(rows, name)}" for name in args.datasets)
        + "). "
        "Sentences (train / dev / test after removing dev and test sentences found in train"
        + (", then keeping a random sample" if args.train_sentences or args.dev_sentences else "")
        + "): "
        + "; ".join(
            f"{name} {_count(c, 'train')} / {_count(c, 'dev')} (-{c['dev_removed']}) / {c['test']:,} "
            f"(-{c['test_removed']})"
            for name, c in corpora.items()
        )
    )
    table = [
        {
            "dataset": row["dataset"],
            "system": row["name"],
            "dev F1": round(row["dev_f1"], 2),
            "test P": round(row["p"], 2),
            "test R": round(row["r"], 2),
            "R seen / unseen": [round(row["r_seen"], 1), round(row["r_unseen"], 1)],
            "test F1": round(row["f1"], 2),
            "test F1 sd": round(row["f1_sd"], 2) if row["f1_sd"] is not None else None,
            "F1 per seed": [round(f, 2) for f in row["f1_per_seed"]],
            "R-F1": round(row["r_f1"], 2),
            "Asr %": round(row["asr"], 2),
            "training min": round(row["training_min"], 1),
            "chars/s": round(row["chars_per_s"]),
        }
        for row in rows
    ]
    return Section(f"Datasets: {', '.join(args.systems)} on {', '.join(args.datasets)}", notes, [table])


def _seen_counts(rows: list, dataset: str) -> str:
    first = next(row for row in rows if row["dataset"] == dataset)
    return f"{first['n_seen']:,} seen, {first['n_unseen']:,} unseen"


def _count(counts: dict, split: str) -> str:
    kept, whole = counts[split], counts[f"{split}_all"]
    return f"{kept:,}" if kept == whole else f"{kept:,} of {whole:,}"


if __name__ == "__main__":
    main()
