"""How trained crf_ner pipelines decode doc.ents best: at the best path (Viterbi), at the threshold fitted on dev
(ents_threshold "fitted"), or as ents_threshold "auto" chooses on dev between the two; dev and test F1 each way.

Usage: python bench/bench_decoding.py --dev DEV.spacy --test TEST.spacy --model GROUP/seed0=PATH
       --model GROUP/seed1=PATH ... [--result NAME] [--note TEXT]

Each model is calibrated as its config's callback does it (spacy-cner.calibrate.v1: the temperature, the threshold
and, with "auto", the choice, on DEV), then scored with nlp.evaluate on DEV and TEST at both decodings. The table
gives each model and each group's means (GROUP: the part of the name before the last '/').
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402
from statistics import mean  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, required=True, help="the dev split (.spacy): the fits and the choice")
    parser.add_argument("--test", type=Path, required=True, help="the test split (.spacy)")
    parser.add_argument("--model", action="append", required=True, help="GROUP/NAME=PATH, a trained pipeline")
    parser.add_argument("--note", default="", help="what the models are, for the table's notes")
    add_result_argument(parser, "-")
    args = parser.parse_args()
    rows = [score_model(*item.split("=", 1), args.dev, args.test) for item in args.model]
    groups = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    keys = ("dev_best_path", "dev_threshold", "test_best_path", "test_threshold", "test_auto")
    means = [
        {"group": group, "n": len(members), **{key: mean(row[key] for row in members) for key in keys}}
        for group, members in groups.items()
    ]

    def cells(row: dict) -> dict:
        return {key.replace("_", " "): round(100 * row[key], 2) for key in keys}

    table = [{"model": row["model"], **cells(row), "auto chose": row["auto"]} for row in rows]
    mean_table = [{"group": row["group"], "models": row["n"], **cells(row)} for row in means]
    notes = (
        f"Each model calibrated on {args.dev} (spacy-cner.calibrate.v1 with ents_threshold 'auto': temperature, "
        "threshold, and the decoding with the higher dev F1, the best path on a tie), then nlp.evaluate on dev and "
        f"test at the best path and at the threshold; 'test auto' is test F1 at the decoding dev chose. {args.note}"
    )
    section = Section("Decoding: best path, fitted threshold, chosen on dev", notes, [table, mean_table])
    publish(args.result, {"dev": str(args.dev), "test": str(args.test), "rows": rows, "means": means}, section)


def score_model(name: str, path: str, dev: Path, test: Path) -> dict:
    """One model's fits on dev and its dev and test F1 at each decoding."""
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    from spacy_cner.pipeline.calibration import make_calibrator

    nlp = spacy.load(path)
    pipe = nlp.get_pipe("crf_ner")

    def examples(split: Path) -> list:
        return [Example(nlp.make_doc(doc.text), doc) for doc in DocBin().from_disk(split).get_docs(nlp.vocab)]

    pipe.ents_threshold = "auto"
    make_calibrator(str(dev))(nlp)
    chosen = pipe.entity_threshold is not None
    row = {
        "model": name,
        "group": name.rsplit("/", 1)[0],
        "path": path,
        "temperature": pipe.cfg["temperature"],
        "threshold": pipe.cfg["fitted_threshold"],
        "auto": "threshold" if chosen else "best path",
    }
    for decoding, setting in (("best_path", None), ("threshold", "fitted")):
        pipe.ents_threshold = setting
        for split, data in (("dev", dev), ("test", test)):
            row[f"{split}_{decoding}"] = nlp.evaluate(examples(data))["ents_f"]
    row["test_auto"] = row["test_threshold" if chosen else "test_best_path"]
    return row


if __name__ == "__main__":
    main()
