"""Where a fine-tuned LAC's training step goes (LacFeatures.v2), on one thread: the share of LAC's forward and
backward, FGM's second pass, the optimizer step and the rest of the model, over --steps updates on a train corpus.

    python bench/profile_lac_training.py --config configs/lac_finetune_df_at.cfg --corpus RUNS/msra/corpus
        [--steps 40] [--batch-words 2000] [--sort-buffers 0 1024] [--result NAME]

The pipeline is initialized on the first 500 training docs; the batches are the other docs, shuffled once (seed 0,
as spaCy's training shuffles them each epoch), cut by each --sort-buffers value's batcher: 0, spaCy's
batch_by_words (--batch-words characters, the configs' batcher); N, spaCy's batch_by_padded over buffers of N docs
(sorted by length within each, --batch-words padded characters a batch: fewer real ones). Joined examples and FGM
as the config sets them. The batchers' steps alternate (one update of each in turn, on the same model), so each
runs under the same load. LAC's layer is timed by wrapping its forward and its backprop callback; the optimizer
step (crf_ner.finish_update, LAC's row-wise embedding update included) apart; "the rest" is everything else in
nlp.update (the BiLSTM, the CRF's loss, the joined pairs). The first --warmup steps of each are not counted; the
padding is each batch's docs times its longest doc's characters over its characters.
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()

import argparse  # noqa: E402
import random  # noqa: E402
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
    parser.add_argument(
        "--sort-buffers", type=int, nargs="+", default=[0], help="0: batch_by_words; N: batch_by_padded"
    )
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
    by_batching = {buffer: defaultdict(float) for buffer in args.sort_buffers}
    seconds = by_batching[args.sort_buffers[0]]  # the running step's, set before each update
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
    train = examples[500:]
    random.Random(0).shuffle(train)
    batches = {buffer: batched(train, buffer, args.batch_words, args.steps + args.warmup) for buffer in by_batching}
    counts = {buffer: {"chars": 0, "padded": 0, "steps": 0, "total": 0.0} for buffer in by_batching}
    for index in range(min(len(values) for values in batches.values())):
        for buffer, values in batches.items():
            seconds = by_batching[buffer]
            batch, count = values[index], counts[buffer]
            if index == args.warmup:
                seconds.clear()
                count.update(chars=0, padded=0, steps=0, total=0.0)
            start = time.perf_counter()
            nlp.update(batch, sgd=optimizer, drop=0.5)
            count["total"] += time.perf_counter() - start
            lengths = [len(example.reference.text) for example in batch]
            count["chars"] += sum(lengths)
            count["padded"] += max(lengths) * len(lengths)
            count["steps"] += 1
    rows, figures = [], {"config": str(args.config), "batch_words": args.batch_words, "batchings": {}}
    for buffer, seconds in by_batching.items():
        count = counts[buffer]
        steps, total = count["steps"], count["total"]
        seconds["the rest of nlp.update"] = total - sum(seconds.values())
        batching = batching_name(buffer)
        rows += [
            {
                "Batches": batching,
                "Part": name,
                "ms a step": round(1000 * value / steps, 1),
                "Share %": round(100 * value / total, 1),
            }
            for name, value in seconds.items()
        ]
        rows.append(
            {
                "Batches": batching,
                "Part": f"a step ({count['chars'] / steps:,.0f} chars, padded "
                f"{count['padded'] / count['chars']:.2f}x; {count['chars'] / total:,.0f} chars/s)",
                "ms a step": round(1000 * total / steps, 1),
                "Share %": 100.0,
            }
        )
        figures["batchings"][batching] = {
            "steps": steps,
            "chars": count["chars"],
            "padded_chars": count["padded"],
            "seconds": dict(seconds),
            "total_seconds": total,
            "chars_per_s": count["chars"] / total,
        }
    speeds = ", ".join(f"{name}: {values['chars_per_s']:,.0f}" for name, values in figures["batchings"].items())
    section = Section(
        f"A fine-tuned LAC's training step ({args.config.name}, {args.steps} steps of about {args.batch_words:,} "
        "chars)",
        f"One thread; training characters a second: {speeds}. LAC's forward and backward include FGM's "
        "second pass over them (the attack's extra forward and backward of the whole model is in its parts).",
        [rows],
    )
    publish(args.result, figures, section)


def batching_name(buffer: int) -> str:
    return "batch_by_words" if buffer == 0 else f"batch_by_padded, buffer {buffer}"


def batched(examples: list, buffer: int, size: int, count: int) -> list:
    """The first count batches of spaCy's batch_by_words (buffer 0, tolerance 0.2 as the configs') or
    batch_by_padded (sorted within buffers of this many docs) at size characters."""
    from spacy.util import registry

    if buffer == 0:
        batcher = registry.batchers.get("spacy.batch_by_words.v1")(size=size, tolerance=0.2, discard_oversize=False)
    else:
        batcher = registry.batchers.get("spacy.batch_by_padded.v1")(size=size, buffer=buffer, discard_oversize=False)
    batches = []
    for batch in batcher(examples):
        batches.append(list(batch))
        if len(batches) >= count:
            break
    return batches


if __name__ == "__main__":
    main()
