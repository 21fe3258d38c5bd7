"""Long documents: a 1M-character doc and a long doc batched with short sentences.

Usage: python bench/bench_long_docs.py [--model training/resume/default/model-best]
       [--data ../shared/data/resume] [--chars 1000000] [--mixed-chars 20000]
       [--result NAME]

Texts are the sentences of Resume's dev and test splits (the same sentences, joined, make
the long docs). Each measurement runs in a fresh process, one thread, so that its peak
RSS is its own:
- short: nlp.pipe(batch_size=256) over the sentences, three times over (chars/s, best of 3);
- long: nlp(long doc), with the pipe's default long_doc_window and with 0 (the whole doc
  at once, on a 100k-character doc only: it needs GBs beyond that);
- mixed: one nlp.pipe batch of a --mixed-chars doc and 255 sentences, against the same
  texts run apart (the long doc alone, then the sentences), and whether the entities agree;
- repeated: degenerate docs, "李" repeated 5,000 and --repeated-chars times (no punctuation:
  the spans scored at the candidate threshold could be quadratic in number; they are linear).
Without --model, default.cfg is initialized on Resume train (random weights: the same
time and memory as a trained model, but the entity comparisons then mean little).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import ROOT, Section, add_data_argument, add_out_argument, add_result_argument, convert, publish

CHILD = r"""
import json, resource, sys, time
import spacy

args = json.loads(sys.argv[1])
nlp = spacy.load(args["model"])
if args.get("window") is not None:
    nlp.get_pipe("crf_ner").long_doc_window = args["window"]
sentences = json.loads(open(args["texts"], encoding="utf8").read())
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
ents = lambda doc: [(e.start_char, e.end_char, e.label_) for e in doc.ents]
out = {"base_mb": base_mb}


def long_text(n_chars):
    parts, total = [], 0
    for text in sentences * (n_chars // max(1, sum(map(len, sentences))) + 1):
        if total >= n_chars:
            break
        parts.append(text)
        total += len(text)
    return "".join(parts)[:n_chars]


if args["task"] == "short":
    texts = sentences * 3
    times = []
    for _ in range(3):
        start = time.perf_counter()
        list(nlp.pipe(texts, batch_size=256))
        times.append(time.perf_counter() - start)
    out.update(seconds=min(times), chars=sum(map(len, texts)))
elif args["task"] == "long":
    text = args["repeat"] * args["chars"] if args.get("repeat") else long_text(args["chars"])
    start = time.perf_counter()
    doc = nlp(text)
    out.update(seconds=time.perf_counter() - start, chars=len(text), n_ents=len(doc.ents),
               n_spans=len(doc.spans.get("crf_ner", [])))
elif args["task"] == "mixed":
    long = long_text(args["chars"])
    short = sentences[:255]
    times = {"together": [], "apart": []}
    for _ in range(3):  # alternating, best of 3: warm-up and noise hit both alike
        start = time.perf_counter()
        together = [ents(doc) for doc in nlp.pipe([long] + short, batch_size=256)]
        times["together"].append(time.perf_counter() - start)
        start = time.perf_counter()
        apart = [ents(nlp(long))] + [ents(doc) for doc in nlp.pipe(short, batch_size=256)]
        times["apart"].append(time.perf_counter() - start)
    out["together_s"], out["apart_s"] = min(times["together"]), min(times["apart"])
    out["same_entities"] = together == apart
    out["chars"] = len(long) + sum(map(len, short))
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a trained pipeline; default: default.cfg, untrained")
    add_data_argument(parser, "resume")
    add_out_argument(parser, "long_docs")
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--mixed-chars", type=int, default=20_000)
    parser.add_argument("--whole-chars", type=int, default=100_000, help="doc length for long_doc_window 0")
    parser.add_argument(
        "--repeated-chars", type=int, default=1_000_000, help="a degenerate doc: one character repeated, no punctuation"
    )
    add_result_argument(parser, "long_docs")
    args = parser.parse_args()
    if not (args.data / "test.char.bmes").exists():
        sys.exit(f"No Resume data in {args.data}: pass --data DIR with train/dev/test.char.bmes")
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = convert(args.data, args.out / "corpus")
    model = args.model or untrained_default(corpus, args.out / "untrained")
    texts = args.out / "texts.json"
    texts.write_text(json.dumps(sentences(corpus)), encoding="utf8")

    def child(**settings) -> dict:
        settings = {"model": str(model), "texts": str(texts), **settings}
        result = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(settings)],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        if result.returncode != 0:
            sys.exit(result.stderr[-3000:])
        return json.loads(result.stdout.strip().splitlines()[-1])

    results = {
        "short": child(task="short"),
        "long": child(task="long", chars=args.chars),
        "whole_windowed": child(task="long", chars=args.whole_chars),
        "whole": child(task="long", chars=args.whole_chars, window=0),
        "mixed": child(task="mixed", chars=args.mixed_chars),
        "repeated_short": child(task="long", chars=5_000, repeat="李"),
        "repeated": child(task="long", chars=args.repeated_chars, repeat="李"),
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf8")
    section = render(results, args, model)
    publish(args.result, {"runs": results, "model": model}, section)


def sentences(corpus: Path) -> list:
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("zh")
    return [
        doc.text
        for split in ("dev", "test")
        for doc in DocBin().from_disk(corpus / f"{split}.spacy").get_docs(nlp.vocab)
    ]


def untrained_default(corpus: Path, path: Path) -> Path:
    """default.cfg initialized on the train split (labels, tables), not trained."""
    if not (path / "config.cfg").exists():
        code = (
            "import sys, spacy\n"
            "from spacy.util import load_config, load_model_from_config\n"
            "config = load_config(sys.argv[1], overrides={'paths.train': sys.argv[2], 'paths.dev': sys.argv[2]})\n"
            "nlp = load_model_from_config(config, auto_fill=True)\n"
            "nlp.initialize()\n"
            "nlp.to_disk(sys.argv[3])\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "configs" / "default.cfg"), str(corpus / "train.spacy"), str(path)],
            check=True,
        )
    return path


def render(results: dict, args: argparse.Namespace, model: Path) -> Section:
    short = results["short"]
    short_speed = short["chars"] / short["seconds"]

    def row(name: str, r: dict) -> dict:
        speed = r["chars"] / r["seconds"]
        return {
            "run": name,
            "characters": r["chars"],
            "time s": round(r["seconds"], 1),
            "chars/s": round(speed),
            "of short-text chars/s %": round(speed / short_speed * 100),
            "peak RSS MB": round(r["peak_mb"]),
            "added MB": round(r["peak_mb"] - r["base_mb"]),
        }

    mixed = results["mixed"]
    notes = (
        f"Model: {'`' + str(args.model) + '`' if args.model else 'default.cfg initialized on Resume train, untrained'}"
        ". Each row is a fresh process on one thread; peak RSS includes the loaded pipeline "
        '("added" is the peak minus the RSS after loading). '
        f"Mixed batch: a {args.mixed_chars:,}-char doc and 255 sentences in one nlp.pipe batch took "
        f"{mixed['together_s']:.2f} s; apart (the doc, then the sentences) {mixed['apart_s']:.2f} s "
        f"(ratio {mixed['together_s'] / mixed['apart_s']:.2f}); entities "
        f"{'identical' if mixed['same_entities'] else 'DIFFERENT'} either way. Peak RSS {mixed['peak_mb']:.0f} MB. "
        f"The repeated-character docs had {results['repeated_short']['n_spans']:,} and "
        f"{results['repeated']['n_spans']:,} scored spans in their span group (at most len / candidate_threshold "
        "per label)."
    )
    rows = [
        row("short sentences, nlp.pipe(batch_size=256)", short),
        row(f"one {args.chars:,}-char doc (long_doc_window 512)", results["long"]),
        row(f"one {args.whole_chars:,}-char doc (long_doc_window 512)", results["whole_windowed"]),
        row(f"one {args.whole_chars:,}-char doc (long_doc_window 0: whole, as before)", results["whole"]),
        row('"李" * 5,000 (one character repeated, no punctuation)', results["repeated_short"]),
        row(f'"李" * {args.repeated_chars:,}', results["repeated"]),
    ]
    return Section("Long documents", notes, [rows])


if __name__ == "__main__":
    main()
