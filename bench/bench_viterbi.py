"""The CRF's Viterbi decoder (backends/viterbi.py) against an earlier revision of it, side by side in one process on
one thread: microseconds per character at batch sizes from one text (nlp(text)) to nlp.pipe's, for the tag counts of
the package's CRFs (crf_ner's BIOES over 2 and 8 types, LAC's 57 tags), the sequences' lengths drawn from a dataset's
test split; and whether both give the same paths (the scores drawn as small integers, so that paths tie too).

    python bench/bench_viterbi.py --against 43e8094
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Section, add_data_argument, add_result_argument, module_at, publish  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(parser, "resume")
    parser.add_argument("--against", required=True, help="the git revision to compare with")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 16, 64, 256])
    parser.add_argument("--tags", type=int, nargs="+", default=[9, 33, 57])
    parser.add_argument("--chars", type=int, default=40000, help="characters decoded per version, size and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the versions alternating (best kept)")
    parser.add_argument("--note", default="", help="a sentence added to the notes (the machine's load, say)")
    add_result_argument(parser, "viterbi_small_steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from spacy_cner.backends import viterbi as now
    from spacy_cner.corpus.chars import read_sentences

    then = module_at(args.against, "spacy_cner/backends/viterbi.py", "viterbi_then")
    test = next(path for path in sorted(args.data.glob("test*")) if path.is_file())
    lengths_of_split = numpy.array([len(sentence.tokens) for sentence in read_sentences(test)])
    rng = numpy.random.default_rng(0)
    rows, same = [], True
    for n_tags in args.tags:
        for batch in args.batch_sizes:
            n_batches = max(1, args.chars // int(lengths_of_split.mean() * batch))
            batches = []
            for _ in range(n_batches):
                lengths = rng.choice(lengths_of_split, batch)
                emissions = torch.from_numpy(rng.integers(-3, 4, (batch, lengths.max(), n_tags)).astype("float32"))
                batches.append((emissions, lengths))
            start, end = (torch.from_numpy(rng.integers(-3, 4, n_tags).astype("float32")) for _ in range(2))
            transitions = torch.from_numpy(rng.integers(-3, 4, (n_tags, n_tags)).astype("float32"))
            n_chars = sum(int(lengths.sum()) for _, lengths in batches)
            best = {"then": float("inf"), "now": float("inf")}
            paths = {}
            for _ in range(args.rounds):
                for name, module in (("then", then), ("now", now)):
                    began = time.process_time()
                    decoded = [module.viterbi_paths(e, n, start, transitions, end) for e, n in batches]
                    best[name] = min(best[name], time.process_time() - began)
                    paths[name] = [path.tolist() for batch_paths in decoded for path in batch_paths]
            same = same and paths["then"] == paths["now"]
            rows.append(
                {
                    "tags": n_tags,
                    "batch size": batch,
                    f"{args.against} us/char": round(1e6 * best["then"] / n_chars, 2),
                    "this checkout us/char": round(1e6 * best["now"] / n_chars, 2),
                    "speed-up": round(best["then"] / best["now"], 2),
                    "same paths": paths["then"] == paths["now"],
                }
            )
            print(rows[-1], flush=True)
    notes = (
        f"One thread, one process; per tag count and batch size about {args.chars:,} characters in "
        f"batches whose lengths are drawn from {test.name} of {args.data.name}, integer scores in [-3, 3] (ties "
        f"included); CPU time, best of {args.rounds} rounds, the two versions alternating. Batch size 1 is "
        "nlp(text)'s; nlp.pipe decodes a batch of up to its batch size (64 by default). " + args.note
    ).strip()
    publish(
        args.result,
        {"rows": rows, "same_paths": same, "against": args.against},
        Section(f"Viterbi decoding: this checkout against {args.against}", notes, [rows]),
    )


if __name__ == "__main__":
    main()
