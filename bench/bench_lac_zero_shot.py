"""LAC's ready pipeline (`python -m spacy_cner pretrained pipeline`) zero-shot on MSRA's and People's Daily's test
splits: no training, its PER/LOC/ORG entities scored against the gold ones (MSRA's NR/NS/NT read as PER/LOC/ORG;
its TIME entities dropped, as neither set marks times). Spans are compared by characters, exactly.

    python bench/bench_lac_zero_shot.py
"""

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Section, add_data_argument, add_result_argument, publish, run  # noqa: E402

# name: (file under --data, tag scheme)
DATASETS = {"msra": ("msra/test.char.bmes", "bmes"), "peoples_daily": ("peoples_daily/example.test", "bio")}
LABELS = {"NR": "PER", "NS": "LOC", "NT": "ORG", "PER": "PER", "LOC": "LOC", "ORG": "ORG"}


def gold_sentences(path: Path, scheme: str, limit: int):
    """(text, {(start, end, label)}) per sentence, character offsets, labels mapped by LABELS."""
    from spacy_cner.corpus.chars import decode_tags, read_sentences

    for index, sentence in enumerate(read_sentences(path)):
        if limit and index >= limit:
            break
        spans, _ = decode_tags(sentence.tags, scheme, repair=True)
        offsets = [0]
        for token in sentence.tokens:
            offsets.append(offsets[-1] + len(token))
        yield "".join(sentence.tokens), {(offsets[start], offsets[end], LABELS[label]) for start, end, label in spans}


def score(nlp, sentences, batch_size: int, timed: int) -> dict:
    """Micro P/R/F1 over exact character spans, per label too, and chars/s: of nlp.pipe (LAC over the sentences
    of batch_size texts at once) and of nlp(text) one text at a time over the first `timed` texts."""
    texts, gold = zip(*sentences)
    start = time.perf_counter()
    docs = list(nlp.pipe(texts, batch_size=batch_size))
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    for text in texts[:timed]:
        nlp(text)
    one_by_one = sum(map(len, texts[:timed])) / (time.perf_counter() - start)
    counts = Counter()
    for doc, expected in zip(docs, gold):
        found = {(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents if ent.label_ in ("PER", "LOC", "ORG")}
        for kind, spans in (("found", found), ("gold", expected), ("right", found & expected)):
            counts[kind, "all"] += len(spans)
            for span in spans:
                counts[kind, span[2]] += 1
    figures = {
        "sentences": len(texts),
        "chars": sum(map(len, texts)),
        "chars_per_s": sum(map(len, texts)) / seconds,
        "one_by_one_chars_per_s": one_by_one,
    }
    for label in ("all", "PER", "LOC", "ORG"):
        p = counts["right", label] / max(counts["found", label], 1)
        r = counts["right", label] / max(counts["gold", label], 1)
        figures[label] = {
            "p": 100 * p,
            "r": 100 * r,
            "f": 100 * (2 * p * r / (p + r) if p + r else 0.0),
            "gold": counts["gold", label],
            "found": counts["found", label],
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(parser)
    parser.add_argument(
        "--pipeline",
        type=Path,
        default=None,
        help="a pipeline written by `pretrained pipeline` (default: written into a temporary folder)",
    )
    parser.add_argument("--sdist", default=None, help="a local LAC-2.1.2.tar.gz (default: the cached or fetched one)")
    parser.add_argument("--limit", type=int, default=0, help="sentences per test split (0: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--timed", type=int, default=300, help="sentences nlp.pipe is timed on")
    add_result_argument(parser, "lac_zero_shot")
    args = parser.parse_args()

    import spacy
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        path = args.pipeline
        if path is None:
            path = Path(scratch) / "zh_lac"
            run(
                [sys.executable, "-m", "spacy_cner", "pretrained", "pipeline", str(path)]
                + (["--sdist", args.sdist] if args.sdist else []),
                quiet=True,
            )
        nlp = spacy.load(path)
        figures = {
            name: score(nlp, list(gold_sentences(args.data / file, scheme, args.limit)), args.batch_size, args.timed)
            for name, (file, scheme) in DATASETS.items()
        }
    rows = [
        {
            "Test split": name,
            "Sentences": f["sentences"],
            "P": round(f["all"]["p"], 2),
            "R": round(f["all"]["r"], 2),
            "F1": round(f["all"]["f"], 2),
            "PER F1": round(f["PER"]["f"], 2),
            "LOC F1": round(f["LOC"]["f"], 2),
            "ORG F1": round(f["ORG"]["f"], 2),
            "Chars/s nlp.pipe": round(f["chars_per_s"]),
            "Chars/s one by one": round(f["one_by_one_chars_per_s"]),
        }
        for name, f in figures.items()
    ]
    section = Section(
        "LAC's ready pipeline zero-shot (no training): test P/R/F1",
        "Exact character spans; MSRA's NR/NS/NT read as PER/LOC/ORG, LAC's TIME entities dropped. Chars/s, one "
        f"thread: nlp.pipe (batch_size {args.batch_size}: LAC reads the sentences of a batch together), and nlp(text) "
        f"over the first {args.timed} sentences one at a time.",
        [rows],
    )
    path = publish(args.result, figures, section)
    if path is not None and not args.limit:
        write_card_scores(path)


def write_card_scores(result: Path) -> None:
    """The scores the ready pipeline's model card gives (spacy_cner/pretrained/lac_package.py reads them): a full
    run's P/R/F1 per test split and label, with its command, date and commit."""
    import json

    record = json.loads(result.read_text(encoding="utf8"))
    card = {
        "result": f"bench/results/{result.name}",
        "command": record["command"],
        "date": record["date"],
        "commit": record["code_version"]["commit"],
        "splits": {
            name: {"sentences": f["sentences"], **{label: f[label] for label in ("all", "PER", "LOC", "ORG")}}
            for name, f in record["figures"].items()
        },
    }
    target = Path(__file__).resolve().parents[1] / "spacy_cner" / "pretrained" / "lac_zero_shot.json"
    target.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    print(f"model card scores: {target}")


if __name__ == "__main__":
    main()
