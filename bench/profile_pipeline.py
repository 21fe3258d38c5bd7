"""Where each microsecond per character goes when a trained pipeline tags text, on one thread.

Usage: python bench/profile_pipeline.py --model RUNS/ecommerce/student/model-best
       --corpus RUNS/ecommerce/corpus/test.spacy [--depth 3] [--repeats 3] [--result NAME]

--model more than once (NAME=PATH, or a path) profiles each on the same texts, one after the other, a table each:
where two configs' microseconds differ, stage by stage.

The corpus's texts in batches of 256 as nlp.pipe gives them, each stage timed apart (best of --repeats):
the tokenizer, then per component its predict and set_annotations; inside predict, the model's layers down
to --depth (thinc's layers timed inclusively by wrapping their forward functions, so a parent's time
holds its children's) and what is left of predict beside the model's forward (crf_ner: the CRF's Viterbi or
forward-backward, the copies to numpy). Figures in microseconds per character and shares of the whole.
cProfile would charge the same time to thinc's generic callbacks (`forward` of chain, with_array) rather
than to the layers they run, so the layers are timed by name here.
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

BATCH = 256


def layer_label(name: str) -> str:
    """A layer's name short enough for a table: thinc names a combinator after all its children
    (chain's a>>b>>c, concatenate's a|b), so long names keep their first and last parts; '|' would split
    a Markdown table's cell."""
    name = name.replace("|", " + ")
    return name if len(name) <= 56 else f"{name[:30]}...{name[-23:]}"


def timed_layers(model, depth: int) -> dict:
    """Wrap the forward function of each layer of model down to depth (the model itself at 0) so that
    its seconds add up under its label, indented by its depth; RETURNS the seconds by label, the layers
    in pre-order (a dict the wrappers write into)."""
    seconds = {}

    def wrap(layer, label: str, level: int) -> None:
        inner = layer._func
        seconds[label] = 0.0

        def forward(model, X, is_train):
            start = time.perf_counter()
            result = inner(model, X, is_train)
            seconds[label] += time.perf_counter() - start
            return result

        layer._func = forward
        if level < depth:
            for i, child in enumerate(layer.layers):
                wrap(child, f"{label.split(' ')[0]}.{i} {'· ' * (level + 1)}{layer_label(child.name)}", level + 1)

    wrap(model, f"0 {layer_label(model.name)}", 0)
    return seconds


def profile(model_path: Path, corpus: Path, depth: int, repeats: int) -> tuple:
    """RETURNS (rows: stage, microseconds per character, share), the texts' count and characters."""
    import spacy
    import torch
    from spacy.tokens import DocBin

    torch.set_num_threads(1)
    nlp = spacy.load(model_path)
    texts = [doc.text for doc in DocBin().from_disk(corpus).get_docs(nlp.vocab)]
    n_chars = sum(map(len, texts))
    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    layer_seconds = {name: timed_layers(pipe.model, depth) for name, pipe in nlp.pipeline if hasattr(pipe, "model")}
    best: dict = {}
    for _ in range(repeats + 1):  # the first pass warms up and is not counted
        for seconds in layer_seconds.values():
            seconds.update(dict.fromkeys(seconds, 0.0))
        run = defaultdict(float)
        for batch in batches:
            start = time.perf_counter()
            docs = [nlp.make_doc(text) for text in batch]
            run["tokenizer"] += time.perf_counter() - start
            for name, pipe in nlp.pipeline:
                start = time.perf_counter()
                predicted = pipe.predict(docs)
                run[f"{name}.predict"] += time.perf_counter() - start
                start = time.perf_counter()
                pipe.set_annotations(docs, predicted)
                run[f"{name}.set_annotations"] += time.perf_counter() - start
        for name, seconds in layer_seconds.items():
            # A combinator whose parent runs its children itself is never called: left out.
            for path, value in seconds.items():
                if value:
                    run[f"{name}.predict: {path}"] = value
            top = next(iter(seconds.values()), 0.0)
            run[f"{name}.predict: the rest (decoding, copies)"] = run[f"{name}.predict"] - top
        run["_total"] = sum(value for stage, value in run.items() if ": " not in stage)
        if not best or run["_total"] < best["_total"]:
            best = dict(run)
    total = best.pop("_total")
    rows = [(stage, 1e6 * seconds / n_chars, 100 * seconds / total) for stage, seconds in best.items()]
    rows.append(("total", 1e6 * total / n_chars, 100.0))
    return rows, len(texts), n_chars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", action="append", required=True, help="a trained pipeline (NAME=PATH or a path; more than once: each)"
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a .spacy corpus whose texts are tagged")
    parser.add_argument("--depth", type=int, default=3, help="layers timed down to this depth in the model")
    parser.add_argument("--repeats", type=int, default=3)
    add_result_argument(parser, "-")
    args = parser.parse_args()
    models = [model.split("=", 1) if "=" in model else (Path(model).name, model) for model in args.model]
    tables, profiles, totals = [], {}, []
    for name, path in models:
        rows, n_texts, n_chars = profile(Path(path), args.corpus, args.depth, args.repeats)
        column = "stage" if len(models) == 1 else f"stage ({name})"
        tables.append(
            [{column: stage, "us per char": round(us, 3), "% of total": round(share, 1)} for stage, us, share in rows]
        )
        profiles[name] = {"path": path, "rows": [{"stage": s, "us_per_char": us, "share": sh} for s, us, sh in rows]}
        totals.append(f"{name} {rows[-1][1]:.2f} us per character in all ({1e6 / rows[-1][1]:,.0f} chars/s)")
    notes = (
        f"{n_texts} texts ({n_chars:,} characters) in batches of {BATCH}, best of {args.repeats} after a warm-up; "
        f"{'; '.join(totals)}, without nlp.pipe's overhead. "
        "A layer's time holds its children's; 'the rest' of predict is what its model's forward does not hold."
    )
    figures = {"corpus": str(args.corpus), "n_texts": n_texts, "n_chars": n_chars}
    if len(models) == 1:
        figures.update(model=models[0][1], rows=profiles[models[0][0]]["rows"])
    else:
        figures["models"] = profiles
    title = f"Profile of {models[0][0]}" if len(models) == 1 else f"Profile of {', '.join(name for name, _ in models)}"
    publish(args.result, figures, Section(f"{title} on one thread", notes, tables))


if __name__ == "__main__":
    main()
