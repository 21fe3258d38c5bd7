"""The transformer systems' first steps: dev F1 every few steps, small random encoders, equal steps (CPU).

Usage: python bench/bench_slow_start.py [--data ../shared/data/resume] [--out bench/runs/slow_start]
       [--steps 200] [--layers 2] [--width 128] [--learn-rate 5e-4] [--eval-every 25]
       [--systems bert_crf nezha_crf nezha_bilstm nezha_bilstm_df nezha_bilstm_df_at bert_bilstm]
       [--variant NAME:section.key=value,...] [--result NAME]

The GPU issue's question: on an H100, NEZHA-BiLSTM-CRF + DF + FGM reached dev F1 3.2 after 100 steps from a
random bert-base-sized encoder where BERT-CRF reached 80. Each system here trains from the same kind of random
encoder (bench_gpu's: vocabulary the corpus's characters) with bench_gpu's schedule (linear warm-up over 5% of
the steps, linear decay; the config's tok2vec_learn_rate_scale 0.5), one thread, and the table gives its dev
F1 at each evaluation: which piece (the BiLSTM, DF's initial mix, FGM's epsilon, the rates) delays the start.
--variant adds a run of the last system with more overrides, e.g. "eps0.1:components.crf_ner.adversarial.epsilon=0.1".
"""

import argparse
import json
import re
import sys
import time

from _common import (
    ROOT,
    Section,
    add_data_argument,
    add_out_argument,
    add_result_argument,
    prepare_corpus,
    publish,
    split_settings,
    train,
)
from bench_gpu import write_random_encoders
from bench_transformer import training_schedule

# key: (name in the table, config, encoder)
SYSTEMS = {
    "bert_crf": ("BERT-CRF", "bert_crf.cfg", "bert"),
    "nezha_crf": ("NEZHA-CRF (bert_crf.cfg)", "bert_crf.cfg", "nezha"),
    "nezha_bilstm": ("NEZHA-BiLSTM-CRF", "nezha_bilstm_crf.cfg", "nezha"),
    "nezha_bilstm_df": ("NEZHA-BiLSTM-CRF + DF", "nezha_bilstm_crf_df.cfg", "nezha"),
    "nezha_bilstm_df_at": ("NEZHA-BiLSTM-CRF + DF + FGM", "nezha_bilstm_crf_df_at.cfg", "nezha"),
    "bert_bilstm": ("BERT-BiLSTM-CRF", "bert_bilstm_crf.cfg", "bert"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser, "resume")
    add_out_argument(parser, "slow_start")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--learn-rate", type=float, default=5e-4, help="initial_rate (the layers above the encoder)")
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:overrides: one more run of a system (the last of --systems unless NAME starts "
        "with a system's key and '+'), with these config overrides",
    )
    add_result_argument(parser, "slow_start")
    args = parser.parse_args()
    corpus = prepare_corpus(args.data, args.out)
    encoders = write_random_encoders(args.data, args.out, args.layers, args.width)
    runs = [(key, SYSTEMS[key][0], key, []) for key in args.systems]
    for variant in args.variant:
        name, settings = variant.split(":", 1)
        key = name.split("+", 1)[0] if "+" in name and name.split("+", 1)[0] in SYSTEMS else args.systems[-1]
        runs.append(
            (
                f"{key}+{name.split('+', 1)[-1]}",
                f"{SYSTEMS[key][0]}, {settings}",
                key,
                [f"--{setting}" for setting in split_settings(settings)],
            )
        )
    rows = []
    for run_key, name, key, extra in runs:
        _, config, encoder = SYSTEMS[key]
        out = args.out / run_key
        out.mkdir(parents=True, exist_ok=True)
        overrides = [
            f"--vars.transformer={encoders[encoder]}",
            *training_schedule(args.steps, args.learn_rate),
            f"--training.eval_frequency={args.eval_every}",
            *extra,
        ]
        start = time.perf_counter()
        train(ROOT / "configs" / config, corpus, out, 0, args.steps, True, tuple(overrides))
        curve = dev_curve((out / "train.log").read_text(encoding="utf8"))
        rows.append({"system": name, "key": run_key, "seconds": time.perf_counter() - start, "curve": curve})
        print(json.dumps(rows[-1]), file=sys.stderr)
    publish(args.result, {"rows": rows}, render(rows, args))


def dev_curve(log: str) -> list:
    """(step, dev ents_f) of each evaluation in a `spacy train` console log."""
    pattern = re.compile(r"\s*\d+\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$")
    return [(int(m.group(1)), float(m.group(2))) for m in map(pattern.match, log.splitlines()) if m]


def render(rows: list, args: argparse.Namespace) -> Section:
    steps = sorted({step for row in rows for step, _ in row["curve"] if step})
    table = [
        {
            "system": row["system"],
            **{
                f"step {step}": round(dict(row["curve"])[step], 2) if step in dict(row["curve"]) else None
                for step in steps
            },
        }
        for row in rows
    ]
    return Section(
        f"The first {args.steps} steps from a random {args.layers}-layer width-{args.width} encoder (CPU)",
        f"Resume, dev F1 after each number of steps; initial_rate {args.learn_rate} (the encoder at the configs' "
        f"0.5 of it), warm-up over 5% of the steps, linear decay; one thread.",
        [table],
    )


if __name__ == "__main__":
    main()
