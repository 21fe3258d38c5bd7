"""A copy of a trained crf_ner pipeline that decodes doc.ents at the threshold fitted on dev.

Usage: python bench/fit_threshold.py MODEL DEV.spacy OUTPUT

For pipelines trained before their config fitted one (students of configs/student*.cfg before the
calibration callback): spacy-cner.calibrate.v1, the callback itself, fits the temperature and the threshold
on DEV, then the pipeline saved to OUTPUT with ents_threshold "fitted" in its config (the
weights are the same; spacy.load(MODEL, config={"components": {"crf_ner": {"ents_threshold":
"fitted"}}}) loads a pipeline whose config fitted it the same way). Prints the fits and the dev F1 at
the best path and at the threshold.
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
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    pipe = nlp.get_pipe("crf_ner")
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in DocBin().from_disk(args.dev).get_docs(nlp.vocab)]
    pipe.ents_threshold = None
    best_path = nlp.evaluate(examples)["ents_f"]
    # The configs' own calibration callback: the same fits, and meta["performance"] at the threshold.
    pipe.ents_threshold = "fitted"
    make_calibrator(str(args.dev))(nlp)
    temperature, threshold = pipe.cfg["temperature"], pipe.cfg["fitted_threshold"]
    at_threshold = nlp.meta["performance"]["ents_f"]
    nlp.to_disk(args.output)
    config = nlp.config.copy()
    config["components"]["crf_ner"]["ents_threshold"] = "fitted"
    config.to_disk(args.output / "config.cfg")
    print(
        f"{args.model}: temperature {temperature:.4g}, threshold {threshold:.4g}; dev F1 {best_path * 100:.2f} at the "
        f"best path, {at_threshold * 100:.2f} at the threshold -> {args.output}"
    )


if __name__ == "__main__":
    main()
