"""Where a fine-tuned LAC's training step goes (LacFeatures.v2), on one thread: the share of LAC's forward and
backward, FGM's second pass, the optimizer step and the rest of the model, over --steps updates on a train corpus.

    python bench/profile_lac_training.py --config configs/lac_finetune_df_at.cfg --corpus RUNS/msra/corpus
        [--steps 40] [--batch-words 2000] [--result NAME]

The pipeline is initialized on the first 500 training docs; the batches are the corpus's docs in order, cut at
--batch-words characters (as spaCy's batch_by_words), joined examples and FGM as the config sets them. LAC's layer
is timed by wrapping its forward and its backprop callback; the optimizer step (crf_ner.finish_update, LAC's
row-wise embedding update included) apart; "the rest" is everything else in nlp.update (the BiLSTM, the CRF's
loss, the joined pairs). The first --warmup steps are not counted.
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()

import argparse  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="a folder with train.spacy")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-words", type=int, default=2000)
    add_result_argument(parser, "lac_training_profile")
    args = parser.parse_args()

    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example
    from spacy.util import load_config

    import spacy_cner  # noqa: F401

    config = load_config(args.config, overrides={"paths.train": str(args.corpus / "train.spacy")}, interpolate=False)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    docs = list(DocBin().from_disk(args.corpus / "train.spacy").get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    nlp.initialize(lambda: examples[:500])
    pipe = nlp.get_pipe("crf_ner")
    (layer,) = [node for node in pipe.model.walk() if node.name == "lac_encoder"]
    seconds = defaultdict(float)
    inner = layer._func

    def timed_forward(model, X, is_train):
        start = time.perf_counter()
        Y, backprop = inner(model, X, is_train)
        seconds["LAC forward"] += time.perf_counter() - start

        def timed_backprop(dY):
            start = time.perf_counter()
            result = backprop(dY)
            seconds["LAC backward"] += time.perf_counter() - start
            return result

        return Y, timed_backprop

    layer._func = timed_forward
    finish = pipe.finish_update

    def timed_finish(sgd):
        start = time.perf_counter()
        finish(sgd)
        seconds["optimizer step"] += time.perf_counter() - start

    pipe.finish_update = timed_finish
    optimizer = nlp.create_optimizer()
    batches, batch, words = [], [], 0
    for example in examples[500:]:
        batch.append(example)
        words += len(example.reference)
        if words >= args.batch_words:
            batches.append(batch)
            batch, words = [], 0
        if len(batches) >= args.steps + args.warmup:
            break
    chars = 0
    total = 0.0
    for index, batch in enumerate(batches):
        if index == args.warmup:
            seconds.clear()
            chars, total = 0, 0.0
        start = time.perf_counter()
        nlp.update(batch, sgd=optimizer, drop=0.5)
        total += time.perf_counter() - start
        chars += sum(len(example.reference.text) for example in batch)
    steps = len(batches) - args.warmup
    seconds["the rest of nlp.update"] = total - sum(seconds.values())
    rows = [
        {"Part": name, "ms a step": round(1000 * value / steps, 1), "Share %": round(100 * value / total, 1)}
        for name, value in seconds.items()
    ]
    rows.append({"Part": "a step", "ms a step": round(1000 * total / steps, 1), "Share %": 100.0})
    figures = {
        "config": str(args.config),
        "steps": steps,
        "chars": chars,
        "seconds": dict(seconds),
        "total_seconds": total,
        "chars_per_s": chars / total,
    }
    section = Section(
        f"A fine-tuned LAC's training step ({args.config.name}, {steps} steps of about {args.batch_words:,} chars)",
        f"One thread; {chars / total:,.0f} training characters a second. LAC's forward and backward include FGM's "
        "second pass over them (the attack's extra forward and backward of the whole model is in its parts).",
        [rows],
    )
    publish(args.result, figures, section)


if __name__ == "__main__":
    main()
