"""Inference speed against spaCy's `ner` on every dataset, and where our time goes (one thread, or the default threads).

Usage: python bench/bench_speed.py --runs bench/runs/datasets [--runs DIR ...] [--repeats 3]
       [--spacy-steps 200] [--threads 1] [--result NAME]

Each RUNS/<dataset> of a bench_datasets.py output with a corpus and our default's seed-0 model
(RUNS/<dataset>/default/seed0/model-best) is measured: nlp.pipe(batch_size=256) over its test
texts, best of --repeats, the systems alternating in this one process: ours; ours with every
matrix product row by row (as before the fixed blocks of 2026-11-27; it rounds differently, the
table says whether the entities are the same); ours with configs/fast.cfg
(RUNS/<dataset>/fast/seed0/model-best, where there is one);
spaCy's `ner`. spaCy's model is RUNS/<dataset>/spacy/seed0/model-best, or one trained for
--spacy-steps steps into RUNS/<dataset>/spacy_speed when there is none: its transition-based
`ner` takes one action per token whatever its weights, so its speed does not depend on how long
it trained (its accuracy does: this script reports none). Then our time split into stages: the
tokenizer, the tok2vec, the encoder, the rest of the pipe's predict (output layer, emission
batching, the CRF's forward-backward and entity probabilities) and set_annotations.

--threads 1 (the default) runs every library on one thread (OMP, MKL and OpenBLAS threads 1, torch
1); --threads 0 leaves the libraries' defaults, as a user's nlp.pipe runs (torch takes the cores for
the BiLSTM; spaCy's `ner` multiplies on one thread either way).
"""
import os
import sys

# Before numpy and torch are imported: their thread pools read these once.
_ARGS = " ".join(sys.argv[1:]).replace("=", " ").split()
ONE_THREAD = "--threads" not in _ARGS or _ARGS[_ARGS.index("--threads") + 1 :][:1] != ["0"]
if ONE_THREAD:
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[_name] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from _common import add_result_argument, machine_line, save_result, spacy_ner_config, train  # noqa: E402


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
    table = render(rows, args)
    print(table)
    name = args.result or ("speed_one_thread" if ONE_THREAD else "speed_default_threads")
    save_result(name, {"threads": 1 if ONE_THREAD else torch_threads(), "rows": rows}, table)


def measure(dataset: Path, args) -> dict:
    """chars/s of ours (fixed-block products, row by row, fast.cfg) and spaCy's `ner`, and our seconds
    per stage, on dataset's test."""
    import spacy
    from spacy.tokens import DocBin

    corpus = dataset / "corpus"
    spacy_model = dataset / "spacy" / "seed0" / "model-best"
    if not spacy_model.exists():
        spacy_model = dataset / "spacy_speed" / "seed0" / "model-best"
        if not spacy_model.exists():
            spacy_model.parent.mkdir(parents=True, exist_ok=True)
            config = spacy_ner_config(dataset / "spacy_speed" / "spacy_ner.cfg")
            train(config, corpus, spacy_model.parent, 0, args.spacy_steps, one_thread=True)
    from spacy_cner.layers import _blas

    ours = spacy.load(dataset / "default" / "seed0" / "model-best")
    theirs = spacy.load(spacy_model)
    texts = [doc.text for doc in DocBin().from_disk(corpus / "test.spacy").get_docs(ours.vocab)]
    n_chars = sum(len(text) for text in texts)
    # name -> (pipeline, whether its products go in fixed blocks where they are invariant).
    systems = {"ours": (ours, True), "ours, row by row": (ours, False), "spaCy ner": (theirs, True)}
    fast = dataset / "fast" / "seed0" / "model-best"
    if fast.exists():
        systems["ours, fast.cfg"] = (spacy.load(fast), True)
    seconds = {name: [] for name in systems}
    entities = {}
    blocks_checked = _blas._blocks_are_invariant

    def products(blocks: bool) -> None:
        _blas._blocks_are_invariant = blocks_checked if blocks else (lambda *shape: False)

    for name, (nlp, blocks) in systems.items():
        products(blocks)
        list(nlp.pipe(texts[:256], batch_size=256))  # warm up (jieba's dictionary, lazy tables)
    for _ in range(args.repeats):
        for name, (nlp, blocks) in systems.items():
            products(blocks)
            start = time.perf_counter()
            found = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=256)]
            seconds[name].append(time.perf_counter() - start)
            entities[name] = found
    products(True)
    return {
        "dataset": dataset.name,
        "runs": str(dataset.parent),
        "n_texts": len(texts),
        "n_chars": n_chars,
        "chars_per_s": {name: n_chars / min(times) for name, times in seconds.items()},
        "rowwise_same_entities": entities["ours"] == entities["ours, row by row"],
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


def render(rows: list, args) -> str:
    """The Markdown section: speeds, ratios and our stage shares per dataset."""
    lines = [
        f"### Inference speed against spaCy's `ner` ({datetime.date.today().isoformat()})",
        "",
        f"Command: `python bench/bench_speed.py {' '.join(f'--runs {r}' for r in args.runs)} --repeats {args.repeats}"
        f"{'' if ONE_THREAD else ' --threads 0'}`  ",
        f"Machine: {machine_line()}  ",
        ("One thread (OMP, MKL and OpenBLAS threads 1, torch 1)" if ONE_THREAD else
         f"The libraries' default threads (torch {torch_threads()})")
        + "; nlp.pipe(batch_size=256) over the test texts, "
        f"best of {args.repeats}, the systems alternating; seed-0 models (ours: the runs' default.cfg; fast.cfg "
        "where the runs hold one). Stage shares are ours'.",
        "",
        "| dataset (runs) | texts | chars | ours chars/s | ours, row by row | fast.cfg | spaCy ner "
        "| ours / spaCy | row by row / spaCy | fast.cfg / spaCy | same entities (blocks, row by row) "
        "| tokenizer | tok2vec | encoder | rest of predict | set_annotations |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        speed, stage = row["chars_per_s"], row["stages"]
        total = sum(stage.values())
        shares = " | ".join(f"{stage[k] / total:.0%}" for k in
                            ("tokenizer", "tok2vec", "encoder", "rest of predict", "set_annotations"))
        spacy_speed = speed["spaCy ner"]
        fast = speed.get("ours, fast.cfg")
        lines.append(
            f"| {row['dataset']} ({Path(row['runs']).name}) | {row['n_texts']:,} | {row['n_chars']:,} "
            f"| {speed['ours']:,.0f} | {speed['ours, row by row']:,.0f} | {f'{fast:,.0f}' if fast else 'n/a'} "
            f"| {spacy_speed:,.0f} | {speed['ours'] / spacy_speed:.2f}x | {speed['ours, row by row'] / spacy_speed:.2f}x "
            f"| {f'{fast / spacy_speed:.2f}x' if fast else 'n/a'} | {'yes' if row['rowwise_same_entities'] else 'NO'} "
            f"| {shares} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
