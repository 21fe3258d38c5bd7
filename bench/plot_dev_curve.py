"""The dev curves of trainings, from their `spacy train` console logs, as a PNG.

Usage: python bench/plot_dev_curve.py LOG [LOG ...] --out FIGURE.png [--label NAME ...] [--title TEXT]

Each LOG is a train.log that bench_datasets.py (or `spacy train ... > log`) wrote; its rows
"E  #  LOSS  ENTS_F  ENTS_P  ENTS_R  SCORE" give the dev F1 at each evaluation. The figure plots
dev F1 against the step, one line per log (labelled by --label, else by the log's folder), and
prints each curve's best step and score. Needs matplotlib (pip install "spacy-cner[bench]").
"""

import argparse
import re
import sys
from pathlib import Path
from typing import List, Tuple

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--label", action="append", default=[])
    parser.add_argument("--title", default="Dev F1 during training")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit('matplotlib is not installed: pip install "spacy-cner[bench]"')
    labels = args.label + [log.parent.parent.name + "/" + log.parent.name for log in args.logs[len(args.label) :]]
    figure, axes = plt.subplots(figsize=(7, 4))
    for log, label in zip(args.logs, labels):
        curve = dev_curve(log)
        if not curve:
            sys.exit(f"No evaluation rows in {log}")
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
    firsts = [next((f for _, step, f in dev_curve(log) if step > 0), 0.0) for log in args.logs]
    axes.set_ylim(bottom=max(0.0, min(firsts) - 5))
    axes.set_title(args.title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
