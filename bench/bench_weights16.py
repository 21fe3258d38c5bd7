"""What storing crf_ner's weights in float16 would cost: test F1 and entity agreement of trained pipelines
whose float32 weights are rounded to float16 (and computed in float32, as loading them back would), and
the size of the saved model.

Usage: python bench/bench_weights16.py MODEL [MODEL ...] [--result NAME]

Each MODEL is a model-best of bench/bench_datasets.py (OUT/DATASET/SYSTEM/seedN/model-best): it is scored
on OUT/DATASET/corpus/test.spacy, once as saved and once saved again with crf_ner's save_weights
"float16" (every float32 weight, thinc parameters and torch modules, rounded to float16) and loaded
back. One thread. Issue 34's size target (the default pipeline <= 10 MB on disk): the model is most
of it, and float16 halves it.
"""
import argparse
import json
import sys
from pathlib import Path

from _common import add_result_argument, machine_line, save_result

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
before, found = score(nlp, docs), entities(nlp, docs)
nlp.get_pipe("crf_ner").save_weights = "float16"
nlp.from_bytes(nlp.to_bytes())  # what save_weights "float16" saves, loaded back in float32
after, found16 = score(nlp, docs), entities(nlp, docs)
same = sum(a == b for a, b in zip(found, found16)) / max(1, len(docs))
print("RESULT " + json.dumps({"f32": before, "f16": after, "same_docs": same}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    add_result_argument(parser, "weights16")
    args = parser.parse_args()
    import os
    import subprocess

    rows = []
    for model in args.models:
        test = model.parents[2] / "corpus" / "test.spacy"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        result = subprocess.run([sys.executable, "-c", CHILD, str(model), str(test)], capture_output=True, text=True, env=env)
        if result.returncode != 0:
            sys.exit(f"Failed on {model}:\n{result.stderr[-3000:]}")
        found = json.loads([line for line in result.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
        size = sum(f.stat().st_size for f in (model / "crf_ner").rglob("*") if f.is_file())
        rows.append({"dataset": model.parents[2].name, "system": model.parents[1].name, "seed": model.parent.name,
                     **found, "crf_ner_mb": size / 2**20})
        print(json.dumps(rows[-1]), file=sys.stderr)
    lines = [
        "### crf_ner's weights rounded to float16 (trained default pipelines)",
        "",
        f"Command: `python bench/bench_weights16.py {' '.join(sys.argv[1:])}`  ",
        f"Machine: {machine_line()}  ",
        "Every float32 weight of crf_ner rounded to float16 and computed in float32 (what save_weights \"float16\" "
        "saves and loads); test split; one thread. Per dataset, the mean over its models.",
        "",
        "| dataset | models | test F1 float32 | test F1 float16 weights | docs with the same entities | crf_ner on disk (float32) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset]
        mean = lambda key: sum(r[key] for r in group) / len(group)  # noqa: E731
        lines.append(f"| {dataset} | {', '.join(r['system'] + ' ' + r['seed'] for r in group)} | {100 * mean('f32'):.2f} | "
                     f"{100 * mean('f16'):.2f} | {100 * min(r['same_docs'] for r in group):.2f}% (fewest) | "
                     f"{mean('crf_ner_mb'):.1f} MB |")
    table = "\n".join(lines) + "\n"
    print(table)
    save_result(args.result, {"rows": rows}, table)


if __name__ == "__main__":
    main()
