"""How full the bigram tables are: distinct keys per dataset, hash collisions, exact-table sizes.

Usage: python bench/bench_tables.py [--data ../shared/data] [--out bench/runs/corpora]
       [--datasets resume ecommerce youku taobao peoples_daily msra] [--rows 20000] [--result NAME]

For each dataset's train split (converted as bench_datasets.py does), the keys of the default
config's next-bigram table (CharBigramEmbed's ngram_keys, sentence bigrams on): distinct bigrams,
those seen at least twice, and, in a thinc HashEmbed of --rows rows (each key sums 4 hashed rows):
keys per row, and the share of distinct bigrams and of bigram tokens whose 4 rows all hold other
keys too (no row of their own). Then the share of test bigram tokens unseen in train (which an exact
table sends to its unknown row), and the rows and MB of the exact tables (CharBigramEmbed.v2,
two tables of 64 floats a row) at min_count 1 and 2.
"""

import argparse
import sys

import numpy

from _common import Section, add_data_argument, add_out_argument, add_result_argument, publish
from bench_datasets import DATASETS, DEV_FROM_TEST, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    add_out_argument(parser, "corpora")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--rows", type=int, default=20000, help="rows of the hashed bigram table (default.cfg's)")
    add_result_argument(parser, "bigram_collisions")
    args = parser.parse_args()
    import spacy
    from spacy.tokens import DocBin
    from thinc.api import NumpyOps

    from spacy_cner.layers.char_bigram_embed import ngram_keys

    keys_layer = ngram_keys(True, 0.0, True)
    ops = NumpyOps()
    rows, figures = [], {"rows_of_table": args.rows, "datasets": {}}
    for name in args.datasets:
        if not (args.data / name / DATASETS[name][0][0]).exists():
            print(f"No {name} in {args.data}: skipped", file=sys.stderr)
            continue
        corpus = prepare(args.data / name, args.out / name, *DATASETS[name], dev_from_test=DEV_FROM_TEST.get(name, 0))
        nlp = spacy.blank("zh")
        columns = {}
        for split in ("train", "test"):
            docs = list(DocBin().from_disk(corpus["path"] / f"{split}.spacy").get_docs(nlp.vocab))
            columns[split] = numpy.concatenate([k[:, 1] for k in keys_layer.predict(docs) if len(k)])
        train = columns["train"]
        keys, counts = numpy.unique(train, return_counts=True)
        # HashEmbed: 4 rows per key (thinc's ops.hash with the table's seed, mod rows)
        rows = ops.hash(ops.asarray(keys, dtype="uint64"), 12) % args.rows  # shape: (n_keys, 4)
        load = numpy.bincount(rows.ravel().astype("int64"), minlength=args.rows)
        shared = (load[rows] > 1).all(axis=1)
        token_shared = float(counts[shared].sum() / counts.sum())
        unseen = float((~numpy.isin(columns["test"], keys)).mean())
        exact = [int((counts >= m).sum()) + 1 for m in (1, 2)]
        mb = [2 * n * 64 * 4 / 1e6 for n in exact]
        figures["datasets"][name] = {
            "train_chars": len(train),
            "distinct": len(keys),
            "seen_twice": exact[1] - 1,
            "keys_sharing_rows": float(shared.mean()),
            "tokens_sharing_rows": token_shared,
            "test_unseen": unseen,
            "exact_rows": exact,
            "exact_mb": mb,
        }
        rows.append(
            {
                "dataset": name,
                "train chars": len(train),
                "distinct bigrams": len(keys),
                "seen >= 2": exact[1] - 1,
                f"keys per row ({args.rows:,} rows)": round(len(keys) * 4 / args.rows, 1),
                "keys / tokens with no row of their own %": [
                    round(shared.mean() * 100, 1),
                    round(token_shared * 100, 1),
                ],
                "test bigram tokens unseen in train %": round(unseen * 100, 1),
                "exact rows (min 1)": exact[0],
                "MB (min 1)": round(mb[0], 1),
                "exact rows (min 2)": exact[1],
                "MB (min 2)": round(mb[1], 1),
            }
        )
    section = Section("Bigram tables: distinct keys and collisions", "", [rows])
    publish(args.result, figures, section)


if __name__ == "__main__":
    main()
