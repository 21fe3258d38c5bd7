"""A copy of a trained crf_ner pipeline that decodes doc.ents at the threshold fitted on dev.

Usage: python bench/fit_threshold.py MODEL DEV.spacy OUTPUT [--decoding auto]

For pipelines trained before their config fitted one (students of configs/student*.cfg before the
calibration callback): spacy-cner.calibrate.v1, the callback itself, fits the temperature and the threshold
on DEV, then the pipeline saved to OUTPUT with ents_threshold "fitted" in its config (the
weights are the same; spacy.load(MODEL, config={"components": {"crf_ner": {"ents_threshold":
"fitted"}}}) loads a pipeline whose config fitted it the same way). Prints the fits and the dev F1 at
the best path and at the threshold. With --decoding auto the copy's ents_threshold is "auto": it decodes at the
threshold only if that scored a higher dev F1 than the best path.
"""

import argparse
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_cner.pipeline.calibration import make_calibrator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained pipeline with a crf_ner pipe")
    parser.add_argument("dev", type=Path, help="the dev split (.spacy) to fit on")
    parser.add_argument("output", type=Path, help="where the copy goes")
    parser.add_argument("--decoding", choices=("fitted", "auto"), default="fitted", help="the copy's ents_threshold")
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    pipe = nlp.get_pipe("crf_ner")
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in DocBin().from_disk(args.dev).get_docs(nlp.vocab)]
    pipe.ents_threshold = None
    best_path = nlp.evaluate(examples)["ents_f"]
    # The configs' own calibration callback: the same fits (and with "auto", the choice of decoding).
    pipe.ents_threshold = args.decoding
    make_calibrator(str(args.dev))(nlp)
    temperature, threshold = pipe.cfg["temperature"], pipe.cfg["fitted_threshold"]
    pipe.ents_threshold = "fitted"
    at_threshold = nlp.evaluate(examples)["ents_f"]
    pipe.ents_threshold = args.decoding
    nlp.to_disk(args.output)
    config = nlp.config.copy()
    config["components"]["crf_ner"]["ents_threshold"] = args.decoding
    config.to_disk(args.output / "config.cfg")
    print(
        f"{args.model}: temperature {temperature:.4g}, threshold {threshold:.4g}; dev F1 {best_path * 100:.2f} at the "
        f"best path, {at_threshold * 100:.2f} at the threshold; decodes at the "
        f"{'threshold' if pipe.entity_threshold is not None else 'best path'} -> {args.output}"
    )


if __name__ == "__main__":
    main()
