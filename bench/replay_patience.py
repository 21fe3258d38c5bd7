"""Replay shorter patiences on finished trainings' dev curves (spaCy's console logs).

Usage: python bench/replay_patience.py LOG [LOG ...] [--patience 800 1000 1200 1400] [--reference 1600]
       [--result NAME]

A training run is deterministic given its seed, so a patience shorter than the one it ran with
stops the same run earlier: its best dev score is the best of the curve up to that stop. For each
log (a `spacy train` console output, as bench_datasets.py keeps in train.log) this prints the
steps and best dev score under the reference patience, and for each shorter one the change in the
best score and the step it would stop at. Runs that ended for another reason (max_steps,
max_epochs) replay only up to their last evaluation.
"""
import argparse
import re
from pathlib import Path
from typing import List, Tuple

from _common import Section, add_result_argument, save_result

# A score row of spaCy's console logger with one component: epoch, step, loss, then the first
# score (ents_f for crf_ner's configs). Rows of more components have more loss columns.
ROW = re.compile(r"^\s*\d+\s+(\d+)\s+\S+\s+([\d.]+)")


def curve(path: Path) -> List[Tuple[int, float]]:
    """(step, dev score) at every evaluation of a log."""
    return [(int(m.group(1)), float(m.group(2))) for m in map(ROW.match, path.read_text().splitlines()) if m]


def replay(points: List[Tuple[int, float]], patience: int) -> Tuple[float, int]:
    """The best score and the step the run stops at, stopping after `patience` steps without a better one."""
    best, best_step = float("-inf"), 0
    for step, score in points:
        if score > best:
            best, best_step = score, step
        if step - best_step >= patience:
            return best, step
    return best, points[-1][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--patience", type=int, nargs="+", default=[800, 1000, 1200, 1400])
    parser.add_argument("--reference", type=int, default=1600)
    add_result_argument(parser, "replay_patience")
    args = parser.parse_args()
    table, figures = [], {"reference": args.reference, "logs": {}}
    for path in args.logs:
        points = curve(path)
        if not points:
            table.append({"log": str(path), "steps": "no score rows"})
            continue
        best, steps = replay(points, args.reference)
        row, figures["logs"][str(path)] = {"log": str(path), "steps": steps, "best dev": round(best, 2)}, {
            "steps": steps, "best": best, "patience": {}}
        for patience in args.patience:
            score, stop = replay(points, patience)
            row[f"patience {patience}: change / stop"] = [round(score - best, 2), stop]
            figures["logs"][str(path)]["patience"][str(patience)] = {"best": score, "stop": stop}
        table.append(row)
    section = Section(
        "Shorter patiences replayed on finished trainings",
        f"Best dev score and steps under a patience of {args.reference:,}; for each shorter one the change in the best "
        "score and the step the run would stop at.", [table])
    print(section.markdown())
    save_result(args.result, figures, section)


if __name__ == "__main__":
    main()
