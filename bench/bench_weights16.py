"""What storing crf_ner's weights in float16 would cost: test F1 and entity agreement of trained pipelines
whose float32 weights are rounded to float16 (and computed in float32, as loading them back would), and
the size of the saved model; and of save_weights "int8-tables" (the embedding tables in int8 instead).

Usage: python bench/bench_weights16.py MODEL [MODEL ...] [--save-weights MODE [MODE ...]] [--result NAME]

Each MODEL is a model-best of bench/bench_datasets.py (OUT/DATASET/SYSTEM/seedN/model-best): it is scored
on OUT/DATASET/corpus/test.spacy, once as saved and once per --save-weights setting, saved again with it
and loaded back ("float16": every float32 weight, thinc parameters and torch modules, rounded to float16;
"int8-tables": the same with the embedding tables in int8). One thread. Issue 34's size target (the
default pipeline <= 10 MB on disk): the model is most of it, float16 halves it, int8 tables halve the
tables again.
"""

import argparse
import json
import sys
from pathlib import Path

from _common import Section, add_result_argument, publish, run_child, single_thread, trained_model

CHILD = """
import json, sys
import torch
torch.set_num_threads(1)
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

def entities(nlp, docs):
    return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe([d.text for d in docs], batch_size=256)]

def score(nlp, docs):
    return nlp.evaluate([Example(nlp.make_doc(d.text), d) for d in docs])["ents_f"]

nlp = spacy.load(sys.argv[1])
docs = list(DocBin().from_disk(sys.argv[2]).get_docs(nlp.vocab))
result = {"f32": score(nlp, docs), "saved_mb": {}, "f": {}, "same_docs": {}}
found = entities(nlp, docs)
for mode in sys.argv[3:]:
    nlp = spacy.load(sys.argv[1])
    nlp.get_pipe("crf_ner").save_weights = mode
    result["saved_mb"][mode] = len(nlp.get_pipe("crf_ner").to_bytes(exclude=["vocab"])) / 2**20
    nlp.from_bytes(nlp.to_bytes())  # what save_weights saves, loaded back in float32
    result["f"][mode] = score(nlp, docs)
    result["same_docs"][mode] = sum(a == b for a, b in zip(found, entities(nlp, docs))) / max(1, len(docs))
print("RESULT " + json.dumps(result))
"""  # noqa: E501  (the child process's code, kept as it runs)
MODES = ("float16", "int8-tables")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--save-weights", nargs="+", default=list(MODES), choices=MODES)
    add_result_argument(parser, "weights16")
    args = parser.parse_args()
    import os

    modes = args.save_weights
    rows = []
    for model in args.models:
        run = trained_model(model)
        found = run_child(CHILD, model, run["test"], *modes, env=single_thread({**os.environ}), failure=f" on {model}")
        size = sum(f.stat().st_size for f in (model / "crf_ner").rglob("*") if f.is_file())
        rows.append(
            {
                "dataset": run["dataset"],
                "system": run["system"],
                "seed": run["seed"],
                **found,
                "crf_ner_mb": size / 2**20,
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    table = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset]
        mean = lambda get: sum(get(r) for r in group) / len(group)  # noqa: E731
        table.append(
            {
                "dataset": dataset,
                "models": ", ".join(r["system"] + " " + r["seed"] for r in group),
                "test F1 float32": round(100 * mean(lambda r: r["f32"]), 2),
                **{f"test F1 {m}": round(100 * mean(lambda r: r["f"][m]), 2) for m in modes},
                f"docs with the same entities (fewest) %: {' / '.join(modes)}": [
                    round(100 * min(r["same_docs"][m] for r in group), 2) for m in modes
                ],
                "crf_ner on disk as saved MB": round(mean(lambda r: r["crf_ner_mb"]), 1),
                f"crf_ner's bytes MB: {' / '.join(modes)}": [round(mean(lambda r: r["saved_mb"][m]), 1) for m in modes],
            }
        )
    section = Section(
        "crf_ner's weights saved with save_weights " + " and ".join(modes) + " (trained default pipelines)",
        "float16: every float32 weight of crf_ner rounded to float16; int8-tables: the embedding tables in int8 (a "
        "scale per row), the other weights in float16; computed in float32 once loaded (what the setting saves and "
        "loads); test split; one thread. Per dataset, the mean over its models; crf_ner's bytes: its model and "
        "lexicon (pipe.to_bytes without the vocab).",
        [table],
    )
    publish(args.result, {"rows": rows}, section)


if __name__ == "__main__":
    main()
