"""What a config trains and predicts, as digests, to show that a change of code changes neither.

Usage: python bench/predictions_digest.py [--configs default tener] [--steps 40] [--sentences 300]
       [--data ../shared/data/resume] [--out bench/runs/digest] [--transformer DIR]

Trains each config (its own settings, seed 0, one thread, through spaCy's training loop with its
before_to_disk fitting) for --steps steps on the first --sentences Resume train sentences, scores on as
many dev sentences, then predicts the test split with model-last. Prints one line per config: the
sha256 of the weights (`crf_ner` to_bytes), of the component's cfg, and of the predictions (each doc's
entities and every span of the span group with its probability, written out in full), then of the
entities alone and of the span group's spans without their probabilities ("entities_digest",
"spans_digest": a change of float rounding leaves them as they were). The predictions are written to
OUT/CONFIG/predictions.json, to compare the probabilities of two runs. The transformer configs
(bert_crf ...) take their encoder from --transformer (a local model folder). Run it at two commits
and compare the lines, e.g. before and after moving code:

  git worktree add /tmp/before REF && (cd /tmp/before && PYTHONPATH=. python bench/predictions_digest.py)
  python bench/predictions_digest.py
"""

import argparse
import os
import subprocess
import sys

from _common import ROOT, add_data_argument, add_out_argument

CODE = """
import hashlib, json, sys
import spacy
from spacy.tokens import DocBin
from spacy.cli.train import train
config, out, corpus, steps, transformer = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
overrides = {"paths.train": f"{corpus}/train.spacy", "paths.dev": f"{corpus}/dev.spacy", "system.seed": 0,
             "training.max_steps": steps, "training.max_epochs": 0, "training.eval_frequency": max(steps // 2, 1)}
if transformer and "transformer" in spacy.util.load_config(config).get("vars", {}):
    overrides["vars.transformer"] = transformer
train(config, out, overrides=overrides)
nlp = spacy.load(f"{out}/model-last")
pipe = nlp.get_pipe("crf_ner")
docs = list(nlp.pipe(doc.text for doc in DocBin().from_disk(f"{corpus}/test.spacy").get_docs(nlp.vocab)))
key = pipe.spans_key
predictions = [[[(e.start_char, e.end_char, e.label_) for e in doc.ents],
                [(s.start_char, s.end_char, s.label_, repr(float(p)))
                 for s, p in zip(doc.spans[key], doc.spans[key].attrs["scores"])] if key else []]
               for doc in docs]
digest = lambda data: hashlib.sha256(data).hexdigest()[:16]
open(f"{out}/predictions.json", "w", encoding="utf8").write(json.dumps(predictions, ensure_ascii=False))
print(json.dumps({"weights": digest(pipe.model.to_bytes()),
                  "cfg": digest(json.dumps(pipe.cfg, sort_keys=True, default=str).encode()),
                  "predictions": digest(json.dumps(predictions, ensure_ascii=False).encode()),
                  "entities_digest": digest(json.dumps([ents for ents, _ in predictions]).encode()),
                  "spans_digest": digest(json.dumps([[s[:3] for s in spans] for _, spans in predictions]).encode()),
                  "entities": sum(len(doc.ents) for doc in docs)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["default", "tener"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--sentences", type=int, default=300)
    add_data_argument(parser, "resume")
    add_out_argument(parser, "digest")
    parser.add_argument("--transformer", default="", help="the transformer configs' encoder (a local model folder)")
    args = parser.parse_args()
    if not (args.data / "train.char.bmes").exists():
        sys.exit(f"No Resume data in {args.data}: pass --data DIR with train/dev/test.char.bmes")
    corpus = args.out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    from spacy.tokens import DocBin

    from spacy_cner.corpus.convert import iter_docs

    for split in ("train", "dev", "test"):
        docs = list(iter_docs(args.data / f"{split}.char.bmes", scheme="bmes", repair=True))
        DocBin(docs=docs if split == "test" else docs[: args.sentences]).to_disk(corpus / f"{split}.spacy")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    for name in args.configs:
        out = args.out / name
        command = [
            sys.executable,
            "-c",
            CODE,
            str(ROOT / "configs" / f"{name}.cfg"),
            str(out),
            str(corpus),
            str(args.steps),
            args.transformer,
        ]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            sys.exit(f"{name} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        print(name, result.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
