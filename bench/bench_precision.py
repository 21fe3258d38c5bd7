"""crf_ner's precision "bfloat16" against float32 on trained pipelines: test F1, the docs tagged alike,
a doc alone against in its batch, and chars/s, one thread.

Usage: python bench/bench_precision.py --model MODEL TEST [--model MODEL TEST ...] [--repeats 3] [--result NAME]

Each MODEL (a trained pipeline with crf_ner) is run over the texts of TEST (a .spacy file with gold
entities) with nlp.pipe(batch_size=256) in float32 and in bfloat16, alternating, best of --repeats;
then, in bfloat16, its first 200 test texts one at a time (their entities must be those of the
batched run: a doc's result does not depend on its batch). Issue 34's reduced-precision targets:
test F1 within 0.3 of float32 on every dataset; chars/s against spaCy's `ner` is bench_speed.py's.
"""

from _common import Section, add_result_argument, save_result, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


PRECISIONS = ("float32", "bfloat16")
ALONE = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs=2, action="append", required=True, metavar=("MODEL", "TEST"), type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    add_result_argument(parser, "precision_models")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    rows = [measure(model, test, args.repeats) for model, test in args.model]
    section = render(rows, args)
    print(section.markdown())
    from spacy_cner.backends.precision import native_bfloat16

    save_result(args.result, {"rows": rows, "native_bfloat16": native_bfloat16()}, section)


def measure(model: Path, test: Path, repeats: int) -> dict:
    import spacy
    from spacy.scorer import Scorer
    from spacy.tokens import DocBin
    from spacy.training import Example

    nlp = spacy.load(model)
    pipe = nlp.get_pipe("crf_ner")
    gold = list(DocBin().from_disk(test).get_docs(nlp.vocab))
    texts = [doc.text for doc in gold]
    seconds = {precision: [] for precision in PRECISIONS}
    predicted = {}
    for precision in PRECISIONS:  # warm up
        pipe.precision = precision
        list(nlp.pipe(texts[:256], batch_size=256))
    for _ in range(repeats):
        for precision in PRECISIONS:
            pipe.precision = precision
            start = time.perf_counter()
            predicted[precision] = list(nlp.pipe(texts, batch_size=256))
            seconds[precision].append(time.perf_counter() - start)
    entities = {
        precision: [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]
        for precision, docs in predicted.items()
    }
    pipe.precision = "bfloat16"
    alone = [[(e.start_char, e.end_char, e.label_) for e in nlp(text).ents] for text in texts[:ALONE]]
    n_chars = sum(len(text) for text in texts)
    row = {
        "model": str(model),
        "test": str(test),
        "n_texts": len(texts),
        "f": {
            precision: Scorer.score_spans([Example(doc, ref) for doc, ref in zip(docs, gold)], "ents")["ents_f"]
            for precision, docs in predicted.items()
        },
        "same_docs": sum(a == b for a, b in zip(entities["float32"], entities["bfloat16"])) / max(1, len(texts)),
        "alone_as_batched": alone == entities["bfloat16"][:ALONE],
        "chars_per_s": {precision: n_chars / min(times) for precision, times in seconds.items()},
    }
    print(row, file=sys.stderr)
    return row


def render(rows: list, args) -> Section:
    """One row per test split (its models' mean F1 in each precision, the largest change of a model, the
    fewest docs tagged alike, and the mean speed-up)."""
    import statistics

    notes = (
        f"One thread; nlp.pipe(batch_size=256) over each test split, best of {args.repeats}, alternating. "
        f'"same docs": the test docs tagged with the same entities (the fewest of the models); "alone": the '
        f"first {ALONE} test texts tagged one at a time in bfloat16 give the entities of the batched run "
        "(every model)."
    )
    result = []
    for test in dict.fromkeys(row["test"] for row in rows):
        group = [row for row in rows if row["test"] == test]
        change = max((100 * (row["f"]["bfloat16"] - row["f"]["float32"]) for row in group), key=abs)
        result.append(
            {
                "test split": test,
                "models": len(group),
                "texts": group[0]["n_texts"],
                "F1 float32": round(statistics.mean(100 * row["f"]["float32"] for row in group), 2),
                "F1 bfloat16": round(statistics.mean(100 * row["f"]["bfloat16"] for row in group), 2),
                "largest change": round(change, 2),
                "same docs %": round(100 * min(row["same_docs"] for row in group), 2),
                "alone": all(row["alone_as_batched"] for row in group),
                "bfloat16 / float32 chars/s": round(
                    statistics.mean(row["chars_per_s"]["bfloat16"] / row["chars_per_s"]["float32"] for row in group), 2
                ),
            }
        )
    return Section('crf_ner\'s precision "bfloat16" against float32 on trained pipelines', notes, [result])


if __name__ == "__main__":
    main()
