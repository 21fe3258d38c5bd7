"""Trained pipelines predicting with each sentence encoded alone: test F1 and sentence-level robustness.

Usage: python bench/bench_sentence_encoding.py MODEL [MODEL ...] [--result NAME]

Each MODEL is a model-best of bench/bench_datasets.py (OUT/DATASET/SYSTEM/seedN/model-best), trained
with the encoder reading whole docs (sentence_encoding false, joined sentence pairs among the training
docs). It is scored on OUT/DATASET/corpus/test.spacy twice in one process, one thread: as trained, and
with its CRFTagger's sentence_encoding set to "predict" (each sentence encoded on its own when
predicting; the CRF still decodes the whole doc). S-F1: the test sentences alone; R-F1 and Asr: adjacent
test sentences joined, against the predictions on them alone (spacy_cner.robustness.metrics, as
bench_datasets scores them); chars/s: nlp.pipe over the test texts, the faster of two passes.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from _common import Section, add_result_argument, publish, run_child, single_thread, trained_model

CHILD = """
import json, sys, time
import torch
torch.set_num_threads(1)
import spacy
from spacy.tokens import DocBin
from spacy_cner.robustness.metrics import evaluate_robustness

nlp = spacy.load(sys.argv[1])
gold = list(DocBin().from_disk(sys.argv[2]).get_docs(nlp.vocab))
texts = [doc.text for doc in gold]
result = {}
for mode in (False, "predict"):
    nlp.get_pipe("crf_ner").model.attrs["sentence_encoding"] = mode
    scores = evaluate_robustness(nlp, gold, pairing="adjacent")
    times = []
    for _ in range(2):
        start = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=256):
            pass
        times.append(time.perf_counter() - start)
    result[str(mode)] = {"s_f": scores.standard.f, "r_f": scores.robust.f, "asr": scores.attack_success_rate,
                         "chars_per_s": sum(map(len, texts)) / min(times)}
print("RESULT " + json.dumps(result))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    add_result_argument(parser, "sentence_encoding")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        run = trained_model(model)
        found = run_child(CHILD, model, run["test"], env=single_thread({**os.environ}), failure=f" on {model}")
        rows.append(
            {
                "dataset": run["dataset"],
                "system": run["system"],
                "seed": run["seed"],
                "whole": found["False"],
                "predict": found["predict"],
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    table = [
        {
            "dataset": row["dataset"],
            "model": f"{row['system']} {row['seed']}",
            "S-F1 whole / predict": [round(100 * row["whole"]["s_f"], 2), round(100 * row["predict"]["s_f"], 2)],
            "R-F1 whole / predict": [round(100 * row["whole"]["r_f"], 2), round(100 * row["predict"]["r_f"], 2)],
            "Asr % whole / predict": [round(100 * row["whole"]["asr"], 2), round(100 * row["predict"]["asr"], 2)],
            "chars/s predict / whole": round(row["predict"]["chars_per_s"] / row["whole"]["chars_per_s"], 2),
        }
        for row in rows
    ]
    section = Section(
        'Predicting with each sentence encoded alone (sentence_encoding "predict") on pipelines trained without it',
        'Each model scored as trained (the encoder reads whole docs) and with sentence_encoding "predict", in one '
        "process, one thread; test split; R-F1 and Asr over adjacent test sentences joined.",
        [table],
    )
    publish(args.result, {"rows": rows}, section)


if __name__ == "__main__":
    main()
