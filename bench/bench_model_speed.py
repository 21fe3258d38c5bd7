"""Inference speed and size of trained pipelines side by side: any models, one corpus, one thread.

Usage: python bench/bench_model_speed.py --corpus RUNS/resume/corpus/test.spacy
       --model default=RUNS/resume/default/seed0/model-best --model lac=... [--repeats 3] [--result NAME]

nlp.pipe(batch_size=256) over the corpus's texts, best of --repeats, the models alternating in this one
process on one thread (OMP, MKL, OpenBLAS and torch); each model's chars/s, its ratio to the first model's,
its test F1 on the corpus and its folder's size on disk. Speed does not depend on how long a model trained,
so a short-trained model stands in for a full one of the same config where only speed is read.
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def measure(models: dict, corpus: Path, repeats: int) -> tuple:
    """Per model (NAME -> path), side by side on one thread: chars/s (best of repeats, the models alternating),
    the ratio to the first model's, test F1 on corpus and size on disk. RETURNS (rows, texts, characters)."""
    import spacy
    import torch
    from spacy.scorer import Scorer
    from spacy.tokens import DocBin
    from spacy.training import Example

    torch.set_num_threads(1)
    pipelines = {name: spacy.load(path) for name, path in models.items()}
    gold = list(DocBin().from_disk(corpus).get_docs(next(iter(pipelines.values())).vocab))
    texts = [doc.text for doc in gold]
    n_chars = sum(map(len, texts))
    seconds = {name: [] for name in pipelines}
    predicted = {}
    for nlp in pipelines.values():
        list(nlp.pipe(texts[:256], batch_size=256))  # warm up (lazy tables, jieba's dictionary)
    for _ in range(repeats):
        for name, nlp in pipelines.items():
            # Each pass starts from the same heap: the model's docs of its last pass are freed and the garbage
            # collected first, so that no pass pays for collecting what the others left (with many models kept
            # side by side, identical students measured up to 25% apart).
            predicted.pop(name, None)
            gc.collect()
            start = time.perf_counter()
            predicted[name] = list(nlp.pipe(texts, batch_size=256))
            seconds[name].append(time.perf_counter() - start)
    first = next(iter(pipelines))
    rows = []
    for name in pipelines:
        speed = n_chars / min(seconds[name])
        f = Scorer.score_spans([Example(doc, ref) for doc, ref in zip(predicted[name], gold)], "ents")["ents_f"]
        rows.append(
            {
                "model": name,
                "path": str(models[name]),
                "chars_per_s": speed,
                "ratio": speed / (n_chars / min(seconds[first])),
                "f": f,
                "mb": folder_mb(Path(models[name])),
            }
        )
    return rows, len(texts), n_chars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a .spacy file with gold entities")
    parser.add_argument("--model", action="append", required=True, help="NAME=PATH, the first is the reference")
    parser.add_argument("--repeats", type=int, default=3)
    add_result_argument(parser, "-")
    args = parser.parse_args()
    models = dict(item.split("=", 1) for item in args.model)
    rows, n_texts, n_chars = measure(models, args.corpus, args.repeats)
    first = rows[0]["model"]
    notes = (
        f"One thread; nlp.pipe(batch_size=256) over {n_texts:,} texts ({n_chars:,} characters), best of "
        f"{args.repeats}, the models alternating; ratio: to {first}'s chars/s."
    )
    table = [
        {
            "model": r["model"],
            "chars/s": round(r["chars_per_s"]),
            "ratio": round(r["ratio"], 2),
            "test F1": round(100 * r["f"], 2),
            "size on disk MB": round(r["mb"], 1),
        }
        for r in rows
    ]
    section = Section("Inference speed and size side by side", notes, [table])
    publish(args.result, {"corpus": str(args.corpus), "n_chars": n_chars, "rows": rows}, section)


if __name__ == "__main__":
    main()
