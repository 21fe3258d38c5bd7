"""Distilled students against their teacher and spaCy's `ner`: test F1, chars/s side by side on one thread, size,
and a picture of the students' test F1 against the unlabeled text their teacher labelled for them.

Usage: python bench/bench_distill.py --corpus RUNS/ecommerce/corpus/test.spacy --reference spacy_ner=PATH
       --teacher lac=PATH --student none:0=PATH --student rest:79365=PATH [--picture bench/distill.svg]
       [--repeats 3] [--result NAME] [--note TEXT]

Each student is `python -m spacy_cner distill TEACHER configs/student.cfg --train ... --text ...`
(docs/distillation.md); NAME:CHARS says how many characters of unlabeled text it had. The reference (spaCy's
`ner`) comes first in the speed run, so every ratio is to its chars/s; the students' ratio to the teacher is
given too (bench_model_speed.measure).
"""

from _common import ROOT, Section, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import math  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_model_speed import measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="the test split (.spacy) with gold entities")
    parser.add_argument("--reference", required=True, help="NAME=PATH: spaCy's ner, the speed reference")
    parser.add_argument("--teacher", required=True, help="NAME=PATH")
    parser.add_argument("--student", action="append", required=True, help="NAME:CHARS=PATH (CHARS: unlabeled text)")
    parser.add_argument("--picture", type=Path, default=None, help="an SVG of test F1 against unlabeled characters")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", default="", help="what the models are (data, seeds), for the table's notes")
    add_result_argument(parser, "-")
    args = parser.parse_args()

    reference, teacher = (item.split("=", 1) for item in (args.reference, args.teacher))
    students = {}
    for item in args.student:
        label, path = item.split("=", 1)
        name, chars = label.rsplit(":", 1)
        students[name] = (int(chars), path)
    models = {reference[0]: reference[1], teacher[0]: teacher[1], **{name: p for name, (_, p) in students.items()}}
    rows, n_texts, n_chars = measure(models, args.corpus, args.repeats)
    by_name = {row["model"]: row for row in rows}
    teacher_row = by_name[teacher[0]]
    for row in rows:
        row["role"] = "reference" if row["model"] == reference[0] else "teacher" if row is teacher_row else "student"
        row["unlabeled_chars"] = students[row["model"]][0] if row["model"] in students else None
        row["ratio_to_teacher"] = row["chars_per_s"] / teacher_row["chars_per_s"]
        row["f_minus_teacher"] = row["f"] - teacher_row["f"]
    notes = (
        f"One thread; nlp.pipe(batch_size=256) over {n_texts:,} test texts ({n_chars:,} characters), best of "
        f"{args.repeats}, the models alternating. {args.note}"
    )
    table = [
        {
            "model": row["model"],
            "role": row["role"],
            "unlabeled chars": row["unlabeled_chars"],
            "test F1": round(100 * row["f"], 2),
            "F1 - teacher": round(100 * row["f_minus_teacher"], 2),
            "chars/s": round(row["chars_per_s"]),
            "x reference": round(row["ratio"], 2),
            "x teacher": round(row["ratio_to_teacher"], 2),
            "size MB": round(row["mb"], 1),
        }
        for row in rows
    ]
    if args.picture:
        write_picture(args.picture, rows, teacher_row)
        notes += f" Picture: {args.picture.resolve().relative_to(ROOT)}."
    section = Section("Distillation: students against their teacher", notes, [table])
    publish(args.result, {"corpus": str(args.corpus), "n_chars": n_chars, "rows": rows}, section)


def write_picture(path: Path, rows: list, teacher_row: dict) -> None:
    """Test F1 of the students against their unlabeled characters, the teacher's F1 as a dashed line."""
    from spacy_cner.training.plots import Panel, Series, svg_picture

    points = sorted((row["unlabeled_chars"], 100 * row["f"]) for row in rows if row["role"] == "student")
    xs = [x for x, _ in points]
    scores = [y for _, y in points] + [100 * teacher_row["f"]]
    panel = Panel(
        "Students' test F1",
        "unlabeled characters the teacher labelled",
        "test F1",
        [
            Series("students", xs, [y for _, y in points]),
            Series(f"teacher ({teacher_row['model']})", [xs[0], xs[-1]], [100 * teacher_row["f"]] * 2, dashed=True),
        ],
        y_range=(math.floor(min(scores)) - 2, math.ceil(max(scores)) + 1),
    )
    path.write_text(svg_picture([panel]), encoding="utf8")


if __name__ == "__main__":
    main()
