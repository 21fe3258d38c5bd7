"""Resume NER: LEBERT's Lexicon Adapter on and off, CPU BiLSTM-CRF and random BERT-CRF, 3 seeds each.

Usage: python bench/bench_lexicon_adapter.py [--data ../shared/data/resume] [--out bench/runs/lexicon_adapter]
       [--systems cpu cpu_lexicon bert bert_lexicon] [--seeds 0 1 2] [--max-steps 2000]
       [--bert-steps 500] [--layers 4] [--width 256] [--jobs 2] [--reuse] [--result NAME]

Each system trains once per seed on the train split (model chosen on dev) and is scored
on test. The CPU systems (char_bigram.cfg, lexicon.cfg: jieba's dictionary, hashed word
embeddings trained from scratch) train for --max-steps; the BERT ones (bert_crf.cfg,
lebert.cfg: adapter after layer 1) fine-tune the same random BERT for --bert-steps with
bench_transformer.py's schedule. The runs are ordered so that with --jobs 2 a system's
runs with and without the adapter for one seed train at the same time, each on one
thread, and the next pair starts when both are done. With --reuse, a run whose model
and training stats are already in --out is not trained again (nor scored again when its
test_scores.json is newer than its training stats).
"""

import argparse
import json
import statistics
from pathlib import Path

from _common import (
    ROOT,
    Section,
    add_data_argument,
    add_out_argument,
    add_result_argument,
    evaluate,
    prepare_corpus,
    publish,
    run_all,
    train_once,
)
from bench_transformer import our_config, random_bert_overrides, write_random_bert

# key: (name in the table, config in configs/, is a BERT system)
SYSTEMS = {
    "cpu": ("BiLSTM-CRF (char_bigram.cfg)", "char_bigram.cfg", False),
    "cpu_lexicon": ("BiLSTM-CRF + Lexicon Adapter (lexicon.cfg, jieba)", "lexicon.cfg", False),
    "bert": ("random BERT-CRF (bert_crf.cfg)", "bert_crf.cfg", True),
    "bert_lexicon": ("random BERT-CRF + Lexicon Adapter after layer 1 (lebert.cfg, jieba)", "lebert.cfg", True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser, "resume")
    add_out_argument(parser, "lexicon_adapter")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=2000, help="training steps of the CPU systems")
    parser.add_argument("--bert-steps", type=int, default=500, help="training steps of the BERT systems")
    parser.add_argument("--layers", type=int, default=4, help="random BERT layers")
    parser.add_argument("--width", type=int, default=256, help="random BERT width")
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument("--reuse", action="store_true", help="keep runs already trained (and scored) in --out")
    add_result_argument(parser, "lexicon_adapter")
    args = parser.parse_args()
    args.systems = [key for key in SYSTEMS if key in args.systems]
    corpus = prepare_corpus(args.data, args.out)
    bert_dir = None
    if any(SYSTEMS[key][2] for key in args.systems):
        bert_dir = write_random_bert(args.data, args.out / "random-bert", args.layers, args.width)
    # With and without the adapter next to each other, seed by seed: cpu s0, cpu_lexicon s0,
    # cpu s1, ... then the BERT systems.
    runs = [
        (key, seed)
        for is_bert in (False, True)
        for seed in args.seeds
        for key in args.systems
        if SYSTEMS[key][2] == is_bert
    ]

    def train_run(run: tuple) -> dict:
        key, seed = run
        _, config_name, is_bert = SYSTEMS[key]
        out = args.out / key / f"seed{seed}"
        config, steps, overrides = ROOT / "configs" / config_name, args.max_steps, []
        if is_bert:
            out.mkdir(parents=True, exist_ok=True)
            config = our_config(config_name, {}, out / config_name)
            overrides, steps = random_bert_overrides(args.bert_steps, 5e-4, bert_dir), args.bert_steps
        return train_once(config, corpus, out, seed, steps, args.jobs > 1, tuple(overrides), reuse=args.reuse)

    # In waves of --jobs runs: a pair starts together, the next one when both are done.
    training = run_all(train_run, runs, args.jobs, waves=True)
    scores = score(runs, args.out, corpus, args.reuse)
    # Inference speed of each system's first-seed model, the systems alternating.
    first = {key: args.out / key / f"seed{args.seeds[0]}" / "model-best" for key in args.systems}
    speeds = {key: result["chars_per_s"] for key, result in evaluate(first, list(first), corpus, 3).items()}
    publish(
        args.result,
        {"training": training, "scores": scores, "chars_per_s": speeds},
        render(training, scores, speeds, args),
    )


def score(runs: list, out: Path, corpus: Path, reuse: bool) -> dict:
    """Test P/R/F1 of every run's best model, in one child process.

    With reuse, a run's test_scores.json is kept when it is newer than its training_stats.json.
    """
    scores, todo = {}, {}
    for key, seed in runs:
        run_dir = out / key / f"seed{seed}"
        path = run_dir / "test_scores.json"
        if reuse and path.exists() and path.stat().st_mtime > (run_dir / "training_stats.json").stat().st_mtime:
            scores[(key, seed)] = json.loads(path.read_text())
        else:
            todo[f"{key}/seed{seed}"] = run_dir / "model-best"
    if todo:
        for name, result in evaluate(todo, [], corpus, 0).items():
            key, seed = name.split("/seed")
            (out / name / "test_scores.json").write_text(json.dumps(result))
            scores[(key, int(seed))] = result
    return scores


def render(training: dict, scores: dict, speeds: dict, args: argparse.Namespace) -> Section:
    """The table's rows (means over seeds) and notes."""
    seeds = args.seeds
    if args.jobs > 1:
        threads = (
            f"{args.jobs} trainings at a time on one thread each, sharing {args.jobs} cores: a system's "
            "runs with and without the adapter for one seed train side by side"
        )
    else:
        threads = "one training at a time"
    notes = (
        f"Seeds {', '.join(map(str, seeds))} ({threads}). CPU systems {args.max_steps} steps; random BERT "
        f"({args.layers} layers, width {args.width}, the same initial weights for every seed) "
        f"{args.bert_steps} steps with bench_transformer.py's schedule. Lexicon: jieba's dictionary, "
        "word embeddings hashed and trained from scratch. Test split, model chosen on dev; P, R and F1 "
        "are means over seeds, F1 with the sample standard deviation, then each seed's F1; "
        "wall time and peak RSS: means over seeds of the training process; inference: characters per "
        f"second of the seed-{seeds[0]} model over the test split (nlp.pipe, best of 3 passes, one process)."
    )
    rows = []
    for key in args.systems:
        per_seed = [scores[(key, seed)] for seed in seeds]
        runs = [training[(key, seed)] for seed in seeds]
        f1 = [s["f"] * 100 for s in per_seed]
        rows.append(
            {
                "system": SYSTEMS[key][0],
                "test P": round(statistics.mean(s["p"] for s in per_seed) * 100, 2),
                "test R": round(statistics.mean(s["r"] for s in per_seed) * 100, 2),
                "test F1": round(statistics.mean(f1), 2),
                "test F1 sd": round(statistics.stdev(f1), 2) if len(f1) > 1 else None,
                "F1 per seed": [round(f, 2) for f in f1],
                "training wall time min": round(statistics.mean(r["seconds"] for r in runs) / 60, 1),
                "training peak RSS MB": round(statistics.mean(r["peak_mb"] for r in runs)),
                "inference chars/s": round(speeds[key]),
            }
        )
    return Section("Resume NER, Lexicon Adapter on and off", notes, [rows])


if __name__ == "__main__":
    main()
