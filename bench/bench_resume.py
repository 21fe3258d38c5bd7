"""Resume NER: our CPU configs vs spaCy's built-in `ner`, side by side in one run.

Usage: python bench/bench_resume.py [--data ../shared/data/resume] [--out bench/runs/resume]
       [--systems default bilstm tener spacy] [--seeds 0 1 2] [--jobs 2] [--max-steps N]
       [--repeats 3] [--result NAME]

Every pipeline trains on the same train split with the best model chosen on dev, once
per seed, and is scored on test. Training runs in a child process each (wall time and
peak memory of that process); with --jobs 2 two trainings run at a time, each on one
thread. Inference speed alternates the systems' seed-0 models in one process, repeated,
so that machine noise hits all alike.
"""
import argparse
import datetime
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import (ROOT, SYSTEMS, add_result_argument, evaluate, machine_line, prepare_corpus, save_result,
                     spacy_ner_config, train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "resume")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "resume")
    # The vectors system needs its vectors trained first: bench_datasets.py does that.
    choices = [key for key in SYSTEMS if key != "vectors"]
    parser.add_argument("--systems", nargs="+", choices=choices, default=choices)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument("--max-steps", type=int, default=0, help="0: the configs' own stopping rules")
    parser.add_argument("--repeats", type=int, default=3, help="inference passes over test per model")
    add_result_argument(parser, "resume")
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
    save_result(args.result, {"training": training, "scores": scores}, table)


def render(training: dict, scores: dict, args: argparse.Namespace) -> str:
    """The Markdown table, with the command, date and machine."""
    command = "python bench/bench_resume.py " + " ".join(sys.argv[1:])
    machine = machine_line()
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


if __name__ == "__main__":
    main()
