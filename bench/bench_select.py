"""Simulated annotation: how many labels each `select` strategy saves against random sampling.

Usage: python bench/bench_select.py [--datasets resume youku msra] [--strategies random entropy ...]
       [--seeds 0 1 2] [--start 200] [--step 200] [--stop 2000] [--max-steps 600] [--pool 0]
       [--jobs 2] [--out bench/runs/select] [--result NAME]

Per dataset, seed and strategy: the train split (its gold entities hidden) is the unlabelled pool;
the same --start sentences (a seeded random sample) are labelled first; each round trains
configs/default.cfg from scratch on the labelled sentences (--max-steps steps, the model kept on
dev), scores it on test, then labels the --step pool sentences the strategy ranks highest (the
model of that round ranks them: `spacy_cner.active_learning.score_docs`, near-duplicates left out
as `select` does), until --stop. --pool N ranks a random sample of N pool sentences per round (0:
all), to size the runs to the machine. Writes results.json, a PNG per dataset (test F1 against
labelled sentences, mean and standard deviation over seeds; needs matplotlib) and a Markdown table
with, per strategy, the F1 at each size and the fewest labels at which its mean F1 reaches random's
F1 at --stop.
"""
import argparse
import datetime
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, add_result_argument, evaluate, machine_line, save_result, train
from bench_datasets import DATASETS, DEV_FROM_TEST, _write, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "select")
    parser.add_argument("--datasets", nargs="+", default=["resume", "youku", "msra"], choices=sorted(DATASETS))
    parser.add_argument("--strategies", nargs="+", default=["random", "entropy", "least-confident", "expected-count"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--start", type=int, default=200)
    parser.add_argument("--step", type=int, default=200)
    parser.add_argument("--stop", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=600, help="training steps per round")
    parser.add_argument("--pool", type=int, default=0, help="pool sentences ranked per round (0: all)")
    parser.add_argument("--jobs", type=int, default=2, help="strategies trained at a time, one thread each")
    add_result_argument(parser, "select")
    args = parser.parse_args()
    results = _load(args.out / "results.json")
    for dataset in args.datasets:
        files, convert_args = DATASETS[dataset]
        corpus = args.out / dataset / "corpus"
        prepare(args.data / dataset, corpus, files, convert_args, dev_from_test=DEV_FROM_TEST.get(dataset, 0))
        runs = [(strategy, seed) for seed in args.seeds for strategy in args.strategies
                if not _done(results, dataset, strategy, seed, args)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for (strategy, seed), curve in zip(runs, pool.map(lambda r: simulate(dataset, corpus, *r, args), runs)):
                results.setdefault(dataset, {}).setdefault(strategy, {})[str(seed)] = curve
                (args.out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf8")
        plot(results[dataset], dataset, args.out / f"{dataset}.png")
    table = render(results, args)
    print(table)
    sizes = {"start": args.start, "step": args.step, "stop": args.stop, "max_steps": args.max_steps, "pool": args.pool}
    save_result(args.result, {"curves": results, **sizes}, table)


def simulate(dataset: str, corpus: Path, strategy: str, seed: int, args) -> dict:
    """One learning curve: {labelled sentences: test F1} (and the seconds each round took)."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_cner.active_learning import NearDuplicates, score_docs

    work = args.out / dataset / strategy / f"seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank("zh")
    pool = list(DocBin().from_disk(corpus / "train.spacy").get_docs(nlp.vocab))
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    labelled, unlabelled = order[: args.start], order[args.start:]
    curve = {}
    while True:
        round_dir = work / f"n{len(labelled)}"
        round_dir.mkdir(exist_ok=True)
        round_corpus = round_dir / "corpus"
        round_corpus.mkdir(exist_ok=True)
        _write([pool[i] for i in labelled], round_corpus / "train.spacy")
        for split in ("dev", "test"):
            (round_corpus / f"{split}.spacy").write_bytes((corpus / f"{split}.spacy").read_bytes())
        trained = train(ROOT / "configs" / "default.cfg", round_corpus, round_dir, seed, args.max_steps, True)
        model = round_dir / "model-best"
        scores = evaluate({"model": model}, [], round_corpus, 0, one_thread=True)["model"]
        curve[str(len(labelled))] = {"f": scores["f"], "train_s": trained["seconds"]}
        if len(labelled) >= args.stop or not unlabelled:
            return curve
        candidates = unlabelled if not args.pool else random.Random(seed * 1000 + len(labelled)).sample(
            unlabelled, min(args.pool, len(unlabelled)))
        if strategy == "random":
            chosen = candidates[: args.step]
        else:
            ranker = spacy.load(model)
            ranked = []
            for i in range(0, len(candidates), 256):
                batch = candidates[i : i + 256]
                _, batch_scores = score_docs(ranker, [pool[j].text for j in batch], strategy, seed)
                ranked.extend(zip(batch_scores, batch))
            ranked.sort(key=lambda item: (-item[0], item[1]))
            guard, chosen = NearDuplicates(0.7, seed=seed), []
            for _, j in ranked:
                if len(chosen) == args.step:
                    break
                if guard.add(pool[j].text):
                    chosen.append(j)
        labelled = labelled + chosen
        taken = set(chosen)
        unlabelled = [j for j in unlabelled if j not in taken]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf8")) if path.exists() else {}


def _done(results: dict, dataset: str, strategy: str, seed: int, args) -> bool:
    curve = results.get(dataset, {}).get(strategy, {}).get(str(seed))
    return bool(curve) and str(args.stop) in {str(k) for k in curve}


def _mean_sd(values):
    import statistics

    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def plot(curves: dict, dataset: str, path: Path) -> None:
    """Test F1 against labelled sentences, mean ± sd over seeds, one line per strategy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'spacy-cner[bench]')", file=sys.stderr)
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    for strategy, seeds in curves.items():
        sizes = sorted({int(n) for curve in seeds.values() for n in curve})
        means, sds = zip(*[_mean_sd([c[str(n)]["f"] * 100 for c in seeds.values() if str(n) in c]) for n in sizes])
        axes.plot(sizes, means, marker="o", label=strategy)
        axes.fill_between(sizes, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)], alpha=0.2)
    axes.set_xlabel("labelled train sentences")
    axes.set_ylabel("test F1")
    axes.set_title(f"{dataset}: active learning with crf_ner's marginals")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def render(results: dict, args) -> str:
    lines = [
        f"### Active learning, simulated ({datetime.date.today().isoformat()})",
        "",
        f"Command: `python bench/bench_select.py {' '.join(sys.argv[1:])}`  ",
        f"Machine: {machine_line()}  ",
        f"configs/default.cfg retrained from scratch each round ({args.max_steps} steps, model kept on dev); test F1, "
        "mean ± sd over the seeds; \"reaches random\": the fewest labelled sentences at which the strategy's mean "
        f"F1 is at least random's at {args.stop}.",
        "",
    ]
    for dataset, curves in results.items():
        sizes = sorted({int(n) for seeds in curves.values() for curve in seeds.values() for n in curve})
        lines += [f"**{dataset}**", "", "| strategy | seeds | " + " | ".join(str(n) for n in sizes) + " | reaches random |",
                  "| --- | ---: | " + " | ".join("---:" for _ in sizes) + " | ---: |"]
        target = None
        if "random" in curves:
            values = [c[str(args.stop)]["f"] for c in curves["random"].values() if str(args.stop) in c]
            target = _mean_sd(values)[0] if values else None
        for strategy, seeds in curves.items():
            cells, reached = [], None
            for n in sizes:
                values = [c[str(n)]["f"] * 100 for c in seeds.values() if str(n) in c]
                if not values:
                    cells.append("")
                    continue
                mean, sd = _mean_sd(values)
                cells.append(f"{mean:.2f} ± {sd:.2f}")
                if reached is None and target is not None and mean >= target * 100:
                    reached = n
            lines.append(f"| {strategy} | {len(seeds)} | " + " | ".join(cells) + f" | {reached or 'no'} |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
