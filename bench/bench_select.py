"""Simulated annotation: how many labels each `select` strategy saves against random sampling.

Usage: python bench/bench_select.py [--datasets resume youku msra] [--strategies random entropy ...]
       [--seeds 0 1 2] [--start 200] [--step 200] [--stop 2000] [--strategy-stop 0]
       [--random-sizes N ...] [--max-steps 600] [--pool 0] [--warm-start] [--explore 0] [--power B] [--jobs 2]
       [--final-sizes N ...] [--random-final-sizes N ...] [--final-steps 0] [--out bench/runs/select]
       [--result NAME]

Per dataset, seed and strategy: the train split (its gold entities hidden) is the unlabelled pool;
the same --start sentences (a seeded random sample) are labelled first, and that first round is
trained once per seed for every strategy. Each round trains configs/default.cfg from scratch on
the labelled sentences (--max-steps steps, the model kept on dev) and scores it on test; a ranking
strategy then labels the --step pool sentences the round's model ranks highest
(`spacy_cner.annotate.select.score_docs`, near-duplicates left out as `select` does), until
--strategy-stop (0: --stop); random labels a random sample of each size of --random-sizes
(default: every --step up to --stop; with --warm-start, random adds --step a round and trains on
from the last round, its curve "random (warm)"). --pool N ranks a random sample of N pool
sentences per round (0: all) and --dev-sentences N chooses each round's model on a random sample
of N dev sentences (0: all): these size the runs to the machine. --explore F draws that share of each
ranked round's sentences at random from the round's candidates instead of the top of the ranking (a
hedge against a weak early model's blind spots); --power B draws all of them instead, each with a
probability proportional to its score to the power B (`annotate.select.power_key`, as `select --power`).
Every round is kept in its folder under --out (round.json), so a run cut off goes on where it stopped
when started again with the same options (a ranking strategy's kept rounds without ranking again).
Writes results.json, a PNG per dataset (test F1 against labelled sentences, mean and standard
deviation over seeds; needs matplotlib) and a Markdown table with, per strategy, the F1 at each size
and the fewest labels at which its mean F1 reaches random's F1 at --stop (the better of "random"
and "random (warm)" where both ran).

--final-sizes N ... answers the question the rounds leave open (their models are trained for a fixed
number of steps, and a warm-started curve's for more at each size than a from-scratch one's): what F1
a team gets from the labelled sentences when it trains the default on them properly. For each seed,
random's first --stop sentences (and first N for N of --random-final-sizes) and each ranking
strategy's labelled sentences at each N of --final-sizes its rounds reached are trained from scratch
with configs/default.cfg's own stopping rule (or --final-steps steps) and scored on test (kept in the
curve's folder, finalN/final.json, with model-best's dev F1). Run the rounds first, with the same
options: with --final-sizes no round is trained. The result then holds these finals only (figures
"finals"), with a table of their F1 and the fewest labels at which a strategy's mean reaches random's
at --stop.
"""

import argparse
import json
import random
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from _common import (
    ROOT,
    Section,
    add_data_argument,
    add_out_argument,
    add_result_argument,
    evaluate,
    save_result,
    train,
)
from bench_datasets import DATASETS, DEV_FROM_TEST, _write, prepare
from report import is_random


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    add_out_argument(parser, "select")
    parser.add_argument("--datasets", nargs="+", default=["resume", "youku", "msra"], choices=sorted(DATASETS))
    parser.add_argument("--strategies", nargs="+", default=["random", "entropy", "least-confident", "expected-count"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--start", type=int, default=200)
    parser.add_argument("--step", type=int, default=200)
    parser.add_argument("--stop", type=int, default=2000)
    parser.add_argument(
        "--strategy-stop",
        type=int,
        default=0,
        help="labelled sentences at which the ranking strategies stop (0: --stop)",
    )
    parser.add_argument(
        "--random-sizes",
        nargs="+",
        type=int,
        default=None,
        help="sizes random is trained at (default: every --step from --start to --stop)",
    )
    parser.add_argument("--max-steps", type=int, default=600, help="training steps per round")
    parser.add_argument("--pool", type=int, default=0, help="pool sentences ranked per round (0: all)")
    parser.add_argument(
        "--dev-sentences",
        type=int,
        default=0,
        help="a random sample of this many dev sentences (0: all): each round's model is chosen on it",
    )
    parser.add_argument(
        "--warm-start",
        action="store_true",
        help="each round of a ranking strategy trains on from the previous round's model (its "
        "weights, lexicon and vectors) instead of from scratch; its curve is '<strategy> (warm)'",
    )
    parser.add_argument(
        "--explore",
        type=float,
        default=0.0,
        help="the share of each ranked round's sentences drawn at random from the round's candidates "
        "instead of the top of the ranking; its curve is '<strategy> (explore F)'",
    )
    parser.add_argument(
        "--power",
        type=float,
        default=None,
        help="draw each ranked round's sentences from its candidates with probabilities "
        "proportional to their scores to this power instead of taking the top; its curve is "
        "'<strategy> (power B)'",
    )
    parser.add_argument(
        "--density",
        type=float,
        default=None,
        help="rank each round's candidates by score * typicality ** D (information density among "
        "the round's candidates, `annotate.select.Typicality`, as `select --density`); its "
        "curve is '<strategy> (density D)'",
    )
    parser.add_argument(
        "--final-sizes",
        nargs="+",
        type=int,
        default=[],
        help="train each curve's labelled sentences at these sizes (random: and at --stop) from "
        "scratch to configs/default.cfg's own stopping rule, scored on test; the result holds "
        "these finals only",
    )
    parser.add_argument(
        "--random-final-sizes",
        nargs="+",
        type=int,
        default=[],
        help="random's finals at these sizes too (always at --stop)",
    )
    parser.add_argument(
        "--final-steps", type=int, default=0, help="steps of each final training (0: the config's own stopping rule)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="strategies trained at a time, one thread each")
    add_result_argument(parser, "select")
    args = parser.parse_args()
    if args.power is not None and (args.explore or args.power <= 0):
        parser.error("--power is a positive exponent and draws every sentence of a round: not with --explore")
    if args.final_sizes:
        # The rounds ran before (their round.json files hold what each strategy labelled): the finals only.
        finals = {dataset: train_finals(dataset, _prepared(dataset, args), args) for dataset in args.datasets}
        (args.out / "finals.json").write_text(json.dumps(finals, indent=1), encoding="utf8")
        section = render_finals(finals, args)
        figures = {
            "finals": finals,
            "stop": args.stop,
            "final_sizes": args.final_sizes,
            "final_steps": args.final_steps,
            "max_steps": args.max_steps,
            "pool": args.pool,
            "dev_sentences": args.dev_sentences,
            "explore": args.explore,
            "power": args.power,
            "density": args.density,
            "warm_start": args.warm_start,
        }
        print_select(section, figures, ("finals",))
        save_result(args.result, figures, section)
        return
    results = _load(args.out / "results.json")
    for dataset in args.datasets:
        corpus = _prepared(dataset, args)
        runs = [
            (strategy, seed)
            for seed in args.seeds
            for strategy in args.strategies
            if not _done(results, dataset, curve_name(strategy, args), seed, args)
        ]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(lambda seed: first_round(dataset, corpus, seed, args), args.seeds))
            for (strategy, seed), curve in zip(runs, pool.map(lambda r: simulate(dataset, corpus, *r, args), runs)):
                # Read again before writing: a run of another dataset into the same --out may have written since.
                results = _load(args.out / "results.json")
                results.setdefault(dataset, {}).setdefault(curve_name(strategy, args), {})[str(seed)] = curve
                (args.out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf8")
        plot(results[dataset], dataset, args.out / f"{dataset}.png")
    section = render(results, args)
    sizes = {
        "warm_start": args.warm_start,
        "explore": args.explore,
        "power": args.power,
        "density": args.density,
        "start": args.start,
        "step": args.step,
        "stop": args.stop,
        "strategy_stop": args.strategy_stop,
        "random_sizes": _random_sizes(args),
        "max_steps": args.max_steps,
        "pool": args.pool,
        "dev_sentences": args.dev_sentences,
    }
    print_select(section, {"curves": results, "stop": args.stop}, ("curves",))
    save_result(args.result, {"curves": results, **sizes}, section)


def _prepared(dataset: str, args) -> Path:
    """The dataset's corpus folder under --out (train, dev sampled to --dev-sentences, test): converted
    once, its splits written again by each run (`bench_datasets.prepare`)."""
    files, convert_args = DATASETS[dataset]
    corpus = args.out / dataset / "corpus"
    prepare(
        args.data / dataset,
        corpus,
        files,
        convert_args,
        sample={"dev": args.dev_sentences},
        dev_from_test=DEV_FROM_TEST.get(dataset, 0),
    )
    return corpus


def curve_name(strategy: str, args) -> str:
    """A strategy's name in the results: warm-started and exploring ranking strategies are curves of their own
    (random's warm curve is "random (warm)"; random has nothing to explore)."""
    kinds = ["warm"] if getattr(args, "warm_start", False) else []
    if strategy == "random":
        return f"random ({kinds[0]})" if kinds else strategy
    kinds += [f"explore {args.explore:g}"] if getattr(args, "explore", 0.0) else []
    kinds += [f"power {args.power:g}"] if getattr(args, "power", None) is not None else []
    kinds += [f"density {args.density:g}"] if getattr(args, "density", None) is not None else []
    return f"{strategy} ({', '.join(kinds)})" if kinds else strategy


def _folder(strategy: str, args) -> str:
    """The folder of a strategy's rounds, one per curve name."""
    warm = "-warm" if getattr(args, "warm_start", False) else ""
    explore = f"-explore{args.explore:g}" if getattr(args, "explore", 0.0) and strategy != "random" else ""
    power = f"-power{args.power:g}" if getattr(args, "power", None) is not None and strategy != "random" else ""
    density = f"-density{args.density:g}" if getattr(args, "density", None) is not None and strategy != "random" else ""
    return strategy + warm + explore + power + density


def pick(ranked: list, texts: list, step: int, explore: float, rng: random.Random, seed: int) -> list:
    """A round's sentences: the top of ranked ((score, index) pairs, best first) and, for a share
    explore of step, a random draw from the rest of ranked (`annotate.select.pick`, as `select`);
    near-duplicates of a chosen sentence (texts[index]) are left out of both."""
    from spacy_cner.annotate.select import NearDuplicates
    from spacy_cner.annotate.select import pick as pick_items

    guard, taken = NearDuplicates(0.7, seed=seed), set()

    def keep(j: int) -> bool:
        if guard.add(texts[j]):
            taken.add(j)
            return True
        return False

    def rest():
        # The candidates the top did not take, in one shuffle (as the measured rounds drew them;
        # select samples a reservoir instead).
        others = [j for _, j in ranked if j not in taken]
        rng.shuffle(others)
        yield from others

    top, drawn = pick_items([j for _, j in ranked], rest(), step, explore, keep)
    return top + drawn


def simulate(dataset: str, corpus: Path, strategy: str, seed: int, args) -> dict:
    """One learning curve: {labelled sentences: {"f": test F1, "train_s": seconds, ...}}.

    The first round (the seed's --start random sentences) is shared by every strategy of a seed
    (`first_round`). random labels the first n sentences of the seed's shuffled pool for each n of
    --random-sizes (no ranking: a random sample of n); a ranking strategy adds --step sentences a
    round up to --strategy-stop; with --warm-start, each of its rounds trains on from the previous
    round's model (`warm_config`), and random adds the next --step sentences of the same shuffled
    pool a round up to --stop, each round training on from the last (the warm strategies' baseline:
    as many steps in all at each size). Each round is kept in its folder (round.json), so a run cut
    off goes on where it stopped.
    """
    import spacy

    from spacy_cner.annotate.select import Typicality, power_key, score_docs

    pool, order = _pool(corpus, seed)
    start = first_round(dataset, corpus, seed, args)
    curve = {str(args.start): _point(start)}
    warm = getattr(args, "warm_start", False)
    work = args.out / dataset / _folder(strategy, args) / f"seed{seed}"
    if strategy == "random":
        record = start
        sizes = range(args.start + args.step, args.stop + 1, args.step) if warm else _random_sizes(args)
        for n in sizes:
            if n != args.start:
                record = _round(
                    work / f"n{n}", order[:n], pool, corpus, seed, args, warm_from=record["model"] if warm else None
                )
                curve[str(n)] = _point(record)
        return curve
    labelled, record = order[: args.start], start
    unlabelled = order[args.start :]
    while len(labelled) < min(args.strategy_stop or args.stop, len(pool)):
        kept = _kept_next(work, labelled, args, warm_from=record["model"] if warm else None)
        if kept is not None:  # this round's ranking chose these before: the same model, the same ranking
            record = kept
            labelled = kept["labelled"]
            taken = set(labelled)
            unlabelled = [j for j in unlabelled if j not in taken]
            curve[str(len(labelled))] = _point(record)
            continue
        candidates = (
            unlabelled
            if not args.pool
            else random.Random(seed * 1000 + len(labelled)).sample(unlabelled, min(args.pool, len(unlabelled)))
        )
        began = time.perf_counter()
        ranker = spacy.load(record["model"])
        ranked = []
        for i in range(0, len(candidates), 256):
            batch = candidates[i : i + 256]
            _, batch_scores = score_docs(ranker, [pool[j].text for j in batch], strategy, seed)
            ranked.extend(zip(batch_scores, batch))
        if getattr(args, "density", None) is not None:  # typicality among the round's candidates
            typicality = Typicality(lambda: (pool[j].text for j in candidates))
            ranked = [(score * typicality(pool[j].text) ** args.density, j) for score, j in ranked]
        if getattr(args, "power", None) is not None:  # the draw: each candidate's key in the candidates' order
            draw = random.Random(seed * 1000 + len(labelled) + 2)
            ranked = [(power_key(score, args.power, draw), j) for score, j in ranked]
        ranked.sort(key=lambda item: (-item[0], item[1]))
        texts = {j: pool[j].text for _, j in ranked}
        chosen = pick(
            ranked,
            texts,
            args.step,
            getattr(args, "explore", 0.0),
            random.Random(seed * 1000 + len(labelled) + 1),
            seed,
        )
        rank_s = time.perf_counter() - began
        labelled = labelled + chosen
        taken = set(chosen)
        unlabelled = [j for j in unlabelled if j not in taken]
        record = _round(
            work / f"n{len(labelled)}",
            labelled,
            pool,
            corpus,
            seed,
            args,
            rank_s=rank_s,
            warm_from=record["model"] if warm else None,
        )
        curve[str(len(labelled))] = _point(record)
    return curve


def _kept_next(work: Path, labelled: list, args, warm_from: Optional[str]) -> Optional[dict]:
    """The kept round that follows labelled (its round.json at labelled + --step sentences, starting
    with labelled, with the same settings), or None: a run started again reads its rounds back without
    ranking the pool again."""
    record_path = work / f"n{len(labelled) + args.step}" / "round.json"
    if not record_path.exists():
        return None
    record = json.loads(record_path.read_text(encoding="utf8"))
    return record if record["labelled"][: len(labelled)] == labelled and _same_round(record, args, warm_from) else None


def _same_round(record: dict, args, warm_from: Optional[str]) -> bool:
    """Whether a kept round was trained with this run's settings (its steps, dev sample and start)."""
    # Rounds kept before dev_sentences was recorded were all run with --dev-sentences 1000.
    return (
        record["max_steps"] == args.max_steps
        and record.get("dev_sentences", 1000) == args.dev_sentences
        and record.get("warm_from") == warm_from
    )


def first_round(dataset: str, corpus: Path, seed: int, args) -> dict:
    """The round every strategy of a seed starts from: the seed's first --start pool sentences."""
    pool, order = _pool(corpus, seed)
    return _round(args.out / dataset / "start" / f"seed{seed}", order[: args.start], pool, corpus, seed, args)


def _pool(corpus: Path, seed: int) -> tuple:
    """The train split's docs (the unlabelled pool, gold entities hidden from the strategies) and
    the seed's order of them."""
    import spacy
    from spacy.tokens import DocBin

    pool = list(DocBin().from_disk(corpus / "train.spacy").get_docs(spacy.blank("zh").vocab))
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    return pool, order


def _random_sizes(args) -> list:
    return sorted(set(args.random_sizes or range(args.start, args.stop + 1, args.step)) | {args.start})


def _round(
    work: Path,
    labelled: list,
    pool: list,
    corpus: Path,
    seed: int,
    args,
    rank_s: float = 0.0,
    warm_from: Optional[str] = None,
) -> dict:
    """Train configs/default.cfg on the labelled sentences (from scratch, or on from the model
    warm_from) and score it on test; kept in work/round.json and read back from there when the same
    sentences were labelled before, with the same settings."""
    record_path = work / "round.json"
    if record_path.exists():
        record = json.loads(record_path.read_text(encoding="utf8"))
        if record["labelled"] == labelled and _same_round(record, args, warm_from):
            return record
    config = ROOT / "configs" / "default.cfg" if warm_from is None else warm_config(Path(warm_from), work / "warm.cfg")
    trained = _train_and_score(work, labelled, pool, corpus, seed, args.max_steps, config)
    record = {
        "labelled": labelled,
        "max_steps": args.max_steps,
        "dev_sentences": args.dev_sentences,
        "f": trained["f"],
        "dev_f": trained["dev_f"],
        "train_s": trained["train_s"],
        "rank_s": rank_s,
        "model": trained["model"],
        "warm_from": warm_from,
    }
    record_path.write_text(json.dumps(record), encoding="utf8")
    return record


def train_finals(dataset: str, corpus: Path, args) -> dict:
    """{curve: {seed: {labelled sentences: {"f", "dev_f", "train_s"}}}}: each seed's random first N
    sentences (N: --stop and --random-final-sizes) and each ranking strategy's labelled sentences at each
    N its rounds reached, trained from scratch (`_final`), --jobs at a time."""
    jobs = []
    pools = {seed: _pool(corpus, seed) for seed in args.seeds}
    for seed in args.seeds:
        order = pools[seed][1]
        for n in sorted(set(args.random_final_sizes) | {args.stop}):
            jobs.append(("random", seed, n, order[:n], args.out / dataset / "random" / f"seed{seed}" / f"final{n}"))
        for strategy in args.strategies:
            if is_random(strategy):
                continue
            work = args.out / dataset / _folder(strategy, args) / f"seed{seed}"
            for n in args.final_sizes:
                round_path = work / f"n{n}" / "round.json"
                if not round_path.exists():
                    print(
                        f"{dataset} {curve_name(strategy, args)} seed {seed}: no round at {n} labelled sentences "
                        f"({round_path}): no final there",
                        file=sys.stderr,
                    )
                    continue
                labelled = json.loads(round_path.read_text(encoding="utf8"))["labelled"]
                jobs.append((curve_name(strategy, args), seed, n, labelled, work / f"final{n}"))
    finals: dict = {}
    with ThreadPoolExecutor(max_workers=args.jobs) as executor:
        records = executor.map(lambda job: _final(job[4], job[3], pools[job[1]][0], corpus, job[1], args), jobs)
        for (curve, seed, n, _, _), record in zip(jobs, records):
            finals.setdefault(curve, {}).setdefault(str(seed), {})[str(n)] = {
                "f": record["f"],
                "dev_f": record.get("dev_f"),
                "train_s": record["train_s"],
            }
    return finals


def _final(work: Path, labelled: list, pool: list, corpus: Path, seed: int, args) -> dict:
    """configs/default.cfg trained from scratch on the labelled sentences to its own stopping rule (or
    --final-steps steps), scored on test; kept in work/final.json and read back when the same sentences
    were trained with the same steps before."""
    record_path = work / "final.json"
    if record_path.exists():
        record = json.loads(record_path.read_text(encoding="utf8"))
        if record["labelled"] == labelled and record["final_steps"] == args.final_steps:
            return record
    record = _train_and_score(work, labelled, pool, corpus, seed, args.final_steps, ROOT / "configs" / "default.cfg")
    record = {"labelled": labelled, "final_steps": args.final_steps, **record}
    record_path.write_text(json.dumps(record), encoding="utf8")
    return record


def _train_and_score(
    work: Path, labelled: list, pool: list, corpus: Path, seed: int, max_steps: int, config: Path
) -> dict:
    """Train config on the labelled pool sentences in work (dev and test: the corpus's), score
    model-best on test; {"f", "dev_f", "train_s", "model"}."""
    work.mkdir(parents=True, exist_ok=True)
    round_corpus = work / "corpus"
    round_corpus.mkdir(exist_ok=True)
    _write([pool[i] for i in labelled], round_corpus / "train.spacy")
    for split in ("dev", "test"):
        (round_corpus / f"{split}.spacy").write_bytes((corpus / f"{split}.spacy").read_bytes())
    trained = train(config, round_corpus, work, seed, max_steps, True)
    model = work / "model-best"
    scores = evaluate({"model": model}, [], round_corpus, 0, one_thread=True)["model"]
    shutil.rmtree(work / "model-last", ignore_errors=True)
    # The dev F1 spaCy kept model-best for (on the round's dev sample): what a variant is chosen on.
    meta = json.loads((model / "meta.json").read_text(encoding="utf8")) if (model / "meta.json").exists() else {}
    return {
        "f": scores["f"],
        "dev_f": meta.get("performance", {}).get("ents_f"),
        "train_s": trained["seconds"],
        "model": str(model),
    }


def render_finals(finals: dict, args) -> Section:
    """The finals' title and notes; their table is report.select_table's, rendered from the figures (printed with
    print_select)."""
    steps = f"{args.final_steps:,} steps" if args.final_steps else "its own stopping rule"
    return Section(
        "Active learning, simulated: the labelled sentences trained properly",
        f"The sentences each curve had labelled at each size (random: the seed's first N of the shuffled train split; "
        f"a ranking strategy: what its rounds chose, {args.max_steps} steps a round) trained from scratch with "
        f"configs/default.cfg to {steps} (one thread, the model kept on dev, its vectors trained on the labelled "
        'sentences), scored on the whole test split; test F1, mean ± sd over the seeds. "reaches random": the '
        f"fewest labelled sentences at which the strategy's mean F1 is at least random's at {args.stop:,}.",
        [],
    )


def print_select(section: Section, figures: dict, keys: tuple) -> str:
    """section's Markdown and the table BENCHMARKS.md shows (report.select_table of the figures), printed;
    RETURNS the text."""
    from report import markdown_table, select_table

    text = section.markdown() + "\n".join(markdown_table(select_table({"select": {"figures": figures}}, keys))) + "\n"
    print(text)
    return text


def warm_config(source: Path, path: Path) -> Path:
    """configs/default.cfg whose crf_ner is sourced from the model at source (spaCy resumes a sourced
    pipe's training: its weights, lexicon, labels and settings, a fresh optimizer) and whose vectors
    are that model's (nothing is trained at initialize when paths.vectors is set): the previous
    round's vectors, trained on fewer sentences, since the pipe's embeddings were trained against them."""
    from spacy.util import load_config

    config = load_config(ROOT / "configs" / "default.cfg")
    config["components"]["crf_ner"] = {"source": str(source)}
    config["paths"]["vectors"] = str(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_disk(path)
    return path


def _point(record: dict) -> dict:
    return {"f": record["f"], "dev_f": record.get("dev_f"), "train_s": record["train_s"], "rank_s": record["rank_s"]}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf8")) if path.exists() else {}


def _done(results: dict, dataset: str, strategy: str, seed: int, args) -> bool:
    curve = results.get(dataset, {}).get(strategy, {}).get(str(seed))
    last = args.stop if is_random(strategy) else (args.strategy_stop or args.stop)
    return bool(curve) and str(last) in {str(k) for k in curve}


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


def render(results: dict, args) -> Section:
    """The rounds' title and notes; their table is report.select_table's, rendered from the figures."""
    random_sizes = ", ".join(f"{n:,}" for n in _random_sizes(args))
    cuts = [f"the ranking strategies stop at {args.strategy_stop:,} labelled sentences"] if args.strategy_stop else []
    if args.pool:
        cuts.append(f"each round ranks a random {args.pool:,} of the unlabelled pool")
    if args.dev_sentences:
        cuts.append(f"each round's model is chosen on a random {args.dev_sentences:,} dev sentences")
    notes = (
        f"configs/default.cfg retrained from scratch each round ({args.max_steps} steps, one thread, the model kept "
        f"on dev, its vectors trained on the labelled sentences), scored on the whole test split; test F1, mean ± sd "
        f"over the seeds. The first {args.start:,} sentences are a seeded random sample, the same for every "
        f"strategy; random is trained at {random_sizes} sentences, a ranking strategy adds {args.step:,} a round. "
        "\"reaches random\": the fewest labelled sentences at which the strategy's mean F1 is at least random's at "
        f"{args.stop:,} (the better of random from scratch and random (warm) where both ran)."
        + (f" Sized to the machine: {'; '.join(cuts)}." if cuts else "")
        + (
            " A \"(warm)\" strategy's rounds train on from the previous round's model and its vectors instead "
            "(the same steps)."
            if any("(warm" in name for curves in results.values() for name in curves)
            else ""
        )
        + (
            " \"explore F\": a share F of each ranked round's sentences is drawn at random from the round's "
            "candidates instead of the top of the ranking."
            if any("explore" in name for curves in results.values() for name in curves)
            else ""
        )
        + (
            ' "power B": each ranked round\'s sentences are drawn from its candidates with probabilities '
            "proportional to their scores to the power B instead of taken from the top."
            if any("power" in name for curves in results.values() for name in curves)
            else ""
        )
    )
    return Section("Active learning, simulated", notes, [])


if __name__ == "__main__":
    main()
