"""Character and bigram vectors trained on the unlabeled text at hand (issue 13, item 2).

Usage: python bench/train_vectors.py [--data ../shared/data] [--out bench/runs/vectors]
       [--datasets NAME ...] [--width 50] [--epochs 10] [--min-count 2] [--seed 0]

The text: the train split of every dataset in --data (or of --datasets), and every split of a
dataset that has no train split (peoples_daily, whose own dev and test bench_datasets splits
from its example.test), read as characters; no dev or test text of a dataset with a train split
is read. MSRA is read only when named (--datasets msra, its own train text for MSRA runs): its
train sentences include People's Daily's test sentences, so vectors that read it must never be
used to score peoples_daily (summary.json lists the datasets not to score with them). gensim's word2vec (skip-gram, as
the gigaword_chn.all.a2b.{uni,bi}.ite50.vec files Lattice-LSTM and TENER use were
trained) learns character vectors on the sentences as characters and bigram vectors on
the sentences as overlapping bigrams. Both go into one word2vec text file, keyed as
CharBigramEmbed looks them up (a character; a bigram as its two characters), then into a
spaCy vectors model with `spacy init vectors zh`, for
`--paths.vectors OUT/model` with `components.crf_ner.model.tok2vec.static_vectors=true`:

  python bench/bench_datasets.py --variant \\
      vectors=default:paths.vectors=bench/runs/vectors/model,components.crf_ner.model.tok2vec.static_vectors=true

Needs gensim: pip install "spacy-cner[vectors]". Prints how much text that was and writes it to
OUT/summary.json. A data-preparation script, not a benchmark: the gain of the vectors is measured
by bench_datasets.py with the variant above. The same --seed gives the same vectors (one worker
thread, and a hash of the words that does not change between runs, as Python's own does).
"""
import argparse
import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import List, Optional

from _common import ROOT

from spacy_cner.convert import iter_docs


def read_sentences(path: Path) -> List[str]:
    """The sentences of an NER file, read by the package's converter (any of its formats; the
    repairs it would make change no text), as plain text."""
    return [doc.text for doc in iter_docs(path, repair=True)]


def stable_hash(text: str) -> int:
    """A hash of a word that is the same in every run (gensim seeds each word's first vector with it)."""
    return zlib.crc32(text.encode("utf8"))


# Datasets whose train text holds another dataset's test text: read only when named.
HOLDS_TEST_OF = {"msra": ["peoples_daily"]}


def unlabeled_files(data: Path, datasets: Optional[List[str]] = None) -> List[Path]:
    """Train splits, and every split of a dataset without one; never a dev or test split of a dataset
    with a train split. datasets: these folders only (None: all but those in HOLDS_TEST_OF)."""
    files = []
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        if (datasets is None and folder.name in HOLDS_TEST_OF) or (datasets is not None and folder.name not in datasets):
            continue
        splits = sorted(p for p in folder.iterdir() if p.is_file() and p.name != "SOURCE.md")
        train = [p for p in splits if p.name.startswith("train")]
        files.extend(train or splits)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "vectors")
    parser.add_argument("--datasets", nargs="+", default=None, help="folders of --data to read (default: all but msra)")
    parser.add_argument("--width", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        from gensim.models import Word2Vec
    except ImportError:
        sys.exit('gensim is not installed: pip install "spacy-cner[vectors]"')
    files = unlabeled_files(args.data, args.datasets)
    if not files:
        sys.exit(f"No data under {args.data}: pass --data DIR")
    sentences = [s for path in files for s in read_sentences(path)]
    chars = [list(s) for s in sentences]
    bigrams = [[a + b for a, b in zip(s, s[1:])] for s in sentences if len(s) > 1]
    settings = dict(vector_size=args.width, window=5, sg=1, min_count=args.min_count, epochs=args.epochs,
                    seed=args.seed, workers=1)
    models = {name: Word2Vec(texts, hashfxn=stable_hash, **settings) for name, texts in (("chars", chars), ("bigrams", bigrams))}
    args.out.mkdir(parents=True, exist_ok=True)
    text_path = args.out / "vectors.txt"
    # A key with a space (E-commerce has space tokens) cannot be written in word2vec's text format.
    rows = [(key, model.wv[key]) for model in models.values() for key in model.wv.index_to_key
            if not any(c.isspace() for c in key)]
    with text_path.open("w", encoding="utf8") as file:
        file.write(f"{len(rows)} {args.width}\n")
        for key, vector in rows:
            file.write(key + " " + " ".join(f"{x:.5f}" for x in vector) + "\n")
    subprocess.run([sys.executable, "-m", "spacy", "init", "vectors", "zh", str(text_path), str(args.out / "model")],
                   check=True)
    summary = {
        "files": [str(p.relative_to(args.data)) for p in files],
        "never_score": sorted({name for p in files for name in HOLDS_TEST_OF.get(p.relative_to(args.data).parts[0], [])}),
        "sentences": len(sentences),
        "characters": sum(len(s) for s in sentences),
        "char_vectors": len(models["chars"].wv.index_to_key),
        "bigram_vectors": len(models["bigrams"].wv.index_to_key),
        "rows_written": len(rows),
        "settings": settings,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
