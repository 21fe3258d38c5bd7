"""Character and bigram vectors trained on the unlabeled text of ../shared/data (issue 13, item 2).

Usage: python bench/train_vectors.py [--data ../shared/data] [--out bench/runs/vectors]
       [--datasets NAME ...] [--width 50] [--epochs 10] [--min-count 2] [--seed 0]

The text: the train split of every dataset in --data (or of --datasets), and every split of a
dataset that has no train split (peoples_daily, whose own dev and test bench_datasets splits
from its example.test), read as characters; no dev or test text of a dataset with a train split
is read. MSRA is read only when named (--datasets msra, its own train text for MSRA runs): its
train sentences include People's Daily's test sentences, so vectors that read it must never be
used to score peoples_daily (summary.json lists the datasets not to score with them). The vectors
are trained as `python -m spacy_cner train-vectors` trains them on one train split
(spacy_cner/training/vectors.py), for `--paths.vectors OUT` with configs/default.cfg:

  python bench/bench_datasets.py --systems default \
      --variant ...
      (or: vectors=default:paths.vectors=bench/runs/vectors,components.crf_ner.model.tok2vec.static_vectors=true)

Needs gensim (a requirement). Prints how much text that was and writes it to
OUT/summary.json. A data-preparation script, not a benchmark: the gain of the vectors is measured
by bench_datasets.py.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from _common import add_data_argument, add_out_argument

from spacy_cner.corpus.convert import iter_docs
from spacy_cner.training.vectors import VectorSettings, train_char_bigram_vectors, vectors_pipeline


def read_sentences(path: Path) -> List[str]:
    """The sentences of an NER file, read by the package's converter (any of its formats; the
    repairs it would make change no text), as plain text."""
    return [doc.text for doc in iter_docs(path, repair=True)]


# Datasets whose train text holds another dataset's test text: read only when named.
HOLDS_TEST_OF = {"msra": ["peoples_daily"]}


def unlabeled_files(data: Path, datasets: Optional[List[str]] = None) -> List[Path]:
    """Train splits, and every split of a dataset without one; never a dev or test split of a dataset
    with a train split. datasets: these folders only (None: all but those in HOLDS_TEST_OF)."""
    files = []
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        if (datasets is None and folder.name in HOLDS_TEST_OF) or (
            datasets is not None and folder.name not in datasets
        ):
            continue
        splits = sorted(p for p in folder.iterdir() if p.is_file() and p.name != "SOURCE.md")
        train = [p for p in splits if p.name.startswith("train")]
        files.extend(train or splits)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    add_out_argument(parser, "vectors")
    parser.add_argument("--datasets", nargs="+", default=None, help="folders of --data to read (default: all but msra)")
    parser.add_argument("--width", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    files = unlabeled_files(args.data, args.datasets)
    if not files:
        sys.exit(f"No data under {args.data}: pass --data DIR")
    sentences = [s for path in files for s in read_sentences(path)]
    settings = VectorSettings(width=args.width, epochs=args.epochs, min_count=args.min_count, seed=args.seed)
    keys, vectors, counts = train_char_bigram_vectors(sentences, settings)
    args.out.mkdir(parents=True, exist_ok=True)
    vectors_pipeline(keys, vectors).to_disk(args.out)
    summary = {
        "files": [str(p.relative_to(args.data)) for p in files],
        "never_score": sorted(
            {name for p in files for name in HOLDS_TEST_OF.get(p.relative_to(args.data).parts[0], [])}
        ),
        "sentences": len(sentences),
        "characters": sum(len(s) for s in sentences),
        **counts,
        "settings": vars(settings),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
