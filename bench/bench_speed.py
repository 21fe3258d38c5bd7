"""Inference speed against spaCy's `ner` on every dataset, and where our time goes (one thread, or the default threads).

Usage: python bench/bench_speed.py --runs bench/runs/datasets [--runs DIR ...] [--repeats 3]
       [--spacy-steps 200] [--threads 1] [--result NAME]

Each RUNS/<dataset> of a bench_datasets.py output with a corpus and our default's seed-0 model
(RUNS/<dataset>/default/seed0/model-best) is measured: nlp.pipe(batch_size=256) over its test
texts, best of --repeats, the systems alternating in this one process: ours (float32); ours with
crf_ner's precision "bfloat16" (not exact: the table gives its test F1 and the share of test docs
with the same entities as float32; the row-by-row products this column replaced are in
bench/HISTORY.md); ours with configs/fast.cfg (RUNS/<dataset>/fast/seed0/model-best, where there is one);
spaCy's `ner`. spaCy's model is RUNS/<dataset>/spacy/seed0/model-best, or one trained for
--spacy-steps steps into RUNS/<dataset>/spacy_speed when there is none: its transition-based
`ner` takes one action per token whatever its weights, so its speed does not depend on how long
it trained (its accuracy does: the F1 column gives that of the model measured, a 200-step one's
where it was trained here, not spaCy's accuracy). Then our time split into stages: the
tokenizer, the tok2vec, the encoder, the rest of the pipe's predict (output layer, emission
batching, the CRF's forward-backward and entity probabilities) and set_annotations.

--threads 1 (the default) runs every library on one thread (OMP, MKL and OpenBLAS threads 1, torch
1); --threads 0 leaves the libraries' defaults, as a user's nlp.pipe runs (torch takes the cores for
the BiLSTM; spaCy's `ner` multiplies on one thread either way).
"""

import sys

from _common import Section, add_result_argument, publish, single_thread, spacy_ner_config, train

# Before numpy and torch are imported: their thread pools read these once.
_ARGS = " ".join(sys.argv[1:]).replace("=", " ").split()
ONE_THREAD = "--threads" not in _ARGS or _ARGS[_ARGS.index("--threads") + 1 :][:1] != ["0"]
if ONE_THREAD:
    single_thread()

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, action="append", required=True, help="a bench_datasets.py --out folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spacy-steps", type=int, default=200)
    parser.add_argument("--threads", type=int, choices=(0, 1), default=1, help="1: one thread; 0: the defaults")
    add_result_argument(parser, None)
    args = parser.parse_args()
    import torch

    if ONE_THREAD:
        torch.set_num_threads(1)
    rows = []
    for runs in args.runs:
        for dataset in sorted(p for p in runs.iterdir() if (p / "default" / "seed0" / "model-best").exists()):
            rows.append(measure(dataset, args))
            print(rows[-1], file=sys.stderr)
    name = args.result or ("speed_one_thread" if ONE_THREAD else "speed_default_threads")
    publish(name, {"threads": 1 if ONE_THREAD else torch_threads(), "rows": rows}, render(rows, args))


def measure(dataset: Path, args) -> dict:
    """chars/s and test F1 of ours (float32, and precision "bfloat16"), fast.cfg and spaCy's `ner`, whether
    bfloat16 tags each doc as float32 does, and our seconds per stage, on dataset's test."""
    import spacy
    from spacy.scorer import Scorer
    from spacy.tokens import DocBin
    from spacy.training import Example

    corpus = dataset / "corpus"
    spacy_model = dataset / "spacy" / "seed0" / "model-best"
    if not spacy_model.exists():
        spacy_model = dataset / "spacy_speed" / "seed0" / "model-best"
        if not spacy_model.exists():
            spacy_model.parent.mkdir(parents=True, exist_ok=True)
            config = spacy_ner_config(dataset / "spacy_speed" / "spacy_ner.cfg")
            train(config, corpus, spacy_model.parent, 0, args.spacy_steps, one_thread=True)
    ours = spacy.load(dataset / "default" / "seed0" / "model-best")
    theirs = spacy.load(spacy_model)
    gold = list(DocBin().from_disk(corpus / "test.spacy").get_docs(ours.vocab))
    texts = [doc.text for doc in gold]
    n_chars = sum(len(text) for text in texts)
    # name -> (pipeline, crf_ner's precision for it).
    systems = {"ours": (ours, "float32"), "ours, bfloat16": (ours, "bfloat16"), "spaCy ner": (theirs, None)}
    fast = dataset / "fast" / "seed0" / "model-best"
    if fast.exists():
        systems["ours, fast.cfg"] = (spacy.load(fast), "float32")
    seconds = {name: [] for name in systems}
    predicted = {}

    def run(name: str) -> list:
        nlp, precision = systems[name]
        if precision is not None:
            nlp.get_pipe("crf_ner").precision = precision
        return list(nlp.pipe(texts, batch_size=256))

    for name in systems:
        run(name)  # warm up (jieba's dictionary, lazy tables, the product checks)
    for _ in range(args.repeats):
        for name in systems:
            start = time.perf_counter()
            predicted[name] = run(name)
            seconds[name].append(time.perf_counter() - start)
    ours.get_pipe("crf_ner").precision = "float32"
    entities = {
        name: [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]
        for name, docs in predicted.items()
    }
    return {
        "dataset": dataset.name,
        "runs": str(dataset.parent),
        "n_texts": len(texts),
        "n_chars": n_chars,
        "chars_per_s": {name: n_chars / min(times) for name, times in seconds.items()},
        "f": {
            name: Scorer.score_spans([Example(doc, ref) for doc, ref in zip(docs, gold)], "ents")["ents_f"]
            for name, docs in predicted.items()
        },
        "bfloat16_same_docs": sum(a == b for a, b in zip(entities["ours"], entities["ours, bfloat16"])) / len(texts),
        "stages": stages(ours, texts, args.repeats),
        "spacy_model": str(spacy_model),
    }


def stages(nlp, texts, repeats: int) -> dict:
    """Our best-of-repeats seconds per stage over texts, in batches of 256 as nlp.pipe."""
    pipe = nlp.get_pipe("crf_ner")
    tok2vec = pipe.model.get_ref("tok2vec")
    encoder = pipe.model.get_ref("encoder") if pipe.model.has_ref("encoder") else None

    def best(function) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
        return min(times)

    batches = [texts[i : i + 256] for i in range(0, len(texts), 256)]
    docs = [[nlp.make_doc(text) for text in batch] for batch in batches]
    vectors = [tok2vec.predict(batch) for batch in docs]
    taggings = [pipe.predict(batch) for batch in docs]
    out = {
        "tokenizer": best(lambda: [[nlp.make_doc(text) for text in batch] for batch in batches]),
        "tok2vec": best(lambda: [tok2vec.predict(batch) for batch in docs]),
        "encoder": best(lambda: [encoder.predict(batch) for batch in vectors]) if encoder is not None else 0.0,
        "predict": best(lambda: [pipe.predict(batch) for batch in docs]),
        "set_annotations": best(lambda: [pipe.set_annotations(b, t) for b, t in zip(docs, taggings)]),
    }
    out["rest of predict"] = out.pop("predict") - out["tok2vec"] - out["encoder"]
    return out


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def render(rows: list, args) -> Section:
    """The table's rows: speeds, ratios, test F1, bfloat16's agreement and our stage shares per dataset."""
    notes = (
        (
            "One thread (OMP, MKL and OpenBLAS threads 1, torch 1)"
            if ONE_THREAD
            else f"The libraries' default threads (torch {torch_threads()})"
        )
        + "; nlp.pipe(batch_size=256) over the test texts, "
        f"best of {args.repeats}, the systems alternating; seed-0 models (ours: the runs' default.cfg, in float32 "
        'and with precision "bfloat16"; fast.cfg where the runs hold one; empty: none). Test F1 of each; '
        '"same docs": the test docs bfloat16 gives the same entities as float32. Stage shares are ours\' '
        "(float32), in %."
    )
    table = []
    for row in rows:
        speed, stage, f = row["chars_per_s"], row["stages"], row["f"]
        total = sum(stage.values())
        spacy_speed = speed["spaCy ner"]
        fast = speed.get("ours, fast.cfg")
        bf16 = speed["ours, bfloat16"]
        table.append(
            {
                "dataset (runs)": f"{row['dataset']} ({Path(row['runs']).name})",
                "texts": row["n_texts"],
                "chars": row["n_chars"],
                "ours chars/s": round(speed["ours"]),
                "ours, bfloat16": round(bf16),
                "fast.cfg": round(fast) if fast else None,
                "spaCy ner": round(spacy_speed),
                "ours / spaCy": round(speed["ours"] / spacy_speed, 2),
                "bfloat16 / spaCy": round(bf16 / spacy_speed, 2),
                "fast.cfg / spaCy": round(fast / spacy_speed, 2) if fast else None,
                "F1 ours / bfloat16 / spaCy": [
                    round(100 * f[key], 2) for key in ("ours", "ours, bfloat16", "spaCy ner")
                ],
                "bfloat16: same docs %": round(100 * row["bfloat16_same_docs"], 2),
                **{
                    key: round(100 * stage[key] / total)
                    for key in ("tokenizer", "tok2vec", "encoder", "rest of predict", "set_annotations")
                },
            }
        )
    return Section("Inference speed against spaCy's `ner`", notes, [table])


if __name__ == "__main__":
    main()
