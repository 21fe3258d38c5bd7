"""The dev curves of trainings, from their `spacy train` console logs, as a PNG and/or a table.

Usage: python bench/plot_dev_curve.py LOG [LOG ...] [--out FIGURE.png] [--label NAME ...] [--title TEXT]
       [--result NAME --every STEPS]

Each LOG is a train.log that bench_datasets.py (or `spacy train ... > log`) wrote; its rows
"E  #  LOSS  ENTS_F  ENTS_P  ENTS_R  SCORE" give the dev F1 at each evaluation. The figure plots
dev F1 against the step, one line per log (labelled by --label, else by the log's folder), and
prints each curve's best step and score. Needs matplotlib (pip install "spacy-cner[bench]").
Without --out it prints the curves side by side instead (no matplotlib needed), and --result saves that
table as a bench result: dev F1 at every --every-th step that each log evaluated, one column a log, and each
log's best and last evaluation.
Comparing trainings step for step is fair where nothing in their schedules depends on how long they
run (spaCy's constant learning rate, a batch size that grows with the step): a run cut short is then
the longer run's curve up to its end.
"""

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from _common import Section, add_result_argument, publish

# A console-logger row: epoch, step, the component's loss(es), then ENTS_F ENTS_P ENTS_R SCORE.
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(?:[\d.]+\s+)+?([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def dev_curve(log: Path) -> List[Tuple[int, int, float]]:
    """(epoch, step, dev F1) of every evaluation row of a training log."""
    rows = []
    for line in log.read_text(encoding="utf8").splitlines():
        match = ROW.match(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if match:
            rows.append((int(match.group(1)), int(match.group(2)), float(match.group(3))))
    return rows


def curve_rows(curves: Dict[str, List[Tuple[int, int, float]]], every: int) -> Tuple[List[dict], List[dict]]:
    """The curves side by side: a row a step that is a multiple of every and that some curve evaluated (a
    curve that did not evaluate there has an empty cell), then a row a curve with its best and last
    evaluation."""
    steps = sorted({step for curve in curves.values() for _, step, _ in curve if step > 0 and step % every == 0})
    at = {label: {step: f1 for _, step, f1 in curve} for label, curve in curves.items()}
    by_step = [{"step": step, **{label: at[label].get(step) for label in curves}} for step in steps]
    summary = []
    for label, curve in curves.items():
        best = max(curve, key=lambda row: row[2])  # the first best: max keeps the earliest of equal scores
        summary.append(
            {
                "training": label,
                "best dev F1": best[2],
                "best at step": best[1],
                "best in epoch": best[0],
                "last dev F1": curve[-1][2],
                "last step": curve[-1][1],
            }
        )
    return by_step, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="the figure (PNG; needs matplotlib)")
    parser.add_argument("--label", action="append", default=[])
    parser.add_argument("--title", default="Dev F1 during training")
    parser.add_argument("--every", type=int, default=1000, help="--result's steps: the multiples of this")
    add_result_argument(parser, "-")
    args = parser.parse_args()
    labels = args.label + [log.parent.parent.name + "/" + log.parent.name for log in args.logs[len(args.label) :]]
    curves = {}
    for log, label in zip(args.logs, labels):
        curves[label] = dev_curve(log)
        if not curves[label]:
            sys.exit(f"No evaluation rows in {log}")
    if args.out is None or args.result not in (None, "-"):  # the table: printed, and saved with --result
        by_step, summary = curve_rows(curves, args.every)
        notes = (
            f"Dev F1 (ents_f) at every {args.every:,}th step each training evaluated, from the logs "
            + ", ".join(str(log) for log in args.logs)
            + "; then each training's best (the first, on ties) and last evaluation."
        )
        publish(args.result, {"curves": curves}, Section(args.title, notes, [by_step, summary]))
    if args.out is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit('matplotlib is not installed: pip install "spacy-cner[bench]"')
    figure, axes = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        steps, scores = [s for _, s, _ in curve], [f for _, _, f in curve]
        axes.plot(steps, scores, label=label)
        best = max(range(len(curve)), key=lambda i: scores[i])
        print(
            f"{label}: best dev F1 {scores[best]:.2f} at step {steps[best]:,} (epoch {curve[best][0]}); "
            f"last {scores[-1]:.2f} at step {steps[-1]:,}"
        )
    axes.set_xlabel("step")
    axes.set_ylabel("dev F1")
    # From a little below the first evaluation after step 0, so that the later gains show.
    firsts = [next((f for _, step, f in curve if step > 0), 0.0) for curve in curves.values()]
    axes.set_ylim(bottom=max(0.0, min(firsts) - 5))
    axes.set_title(args.title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
