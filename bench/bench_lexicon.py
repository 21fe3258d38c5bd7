"""Lexicon loading and matching: time and memory, jieba's dictionary and a synthetic 1M-word vector file.

Usage: python bench/bench_lexicon.py [--data ../shared/data/resume] [--words 1000000] [--dim 50]
       [--cap 3] [--result NAME]

Each measurement runs in a child process: wall time and the growth of its peak resident
memory. Matching throughput: Lexicon.match over every character of Resume test.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import ROOT, Section, add_result_argument, save_result

CHILD = """
import json, resource, sys, time
from spacy_cner.lexicon import Lexicon
def peak_mb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kind, path, data, cap = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
base = peak_mb(); start = time.perf_counter()
lexicon, _ = Lexicon.from_jieba() if kind == "jieba" else Lexicon.from_word2vec(path)
loaded = time.perf_counter()
lexicon.prefixes
built = time.perf_counter()
out = {"words": len(lexicon), "load_s": loaded - start, "index_s": built - loaded, "peak_mb": peak_mb() - base,
       "bytes_mb": len(lexicon.to_bytes()) / 2**20}
if data:
    texts = ["".join(line.split()[0] for line in block.splitlines() if line.strip())
             for block in open(data, encoding="utf8").read().split("\\n\\n")]
    n_chars = sum(len(t) for t in texts); start = time.perf_counter()
    n_pairs = sum(len(words) for t in texts for words in lexicon.match(t, cap))
    out.update(chars_per_s=n_chars / (time.perf_counter() - start), pairs_per_char=n_pairs / n_chars)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "resume")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "lexicon")
    parser.add_argument("--words", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--cap", type=int, default=3, help="max_words_per_char for matching")
    add_result_argument(parser, "lexicon")
    args = parser.parse_args()
    test = args.data / "test.char.bmes"
    if not test.exists():
        sys.exit(f"No Resume data in {args.data}: pass --data DIR with test.char.bmes")
    args.out.mkdir(parents=True, exist_ok=True)
    synthetic = write_vectors(args.out / f"synthetic-{args.words}x{args.dim}.txt", args.words, args.dim)
    results = {
        "jieba dict.txt": measure("jieba", "", test, args.cap),
        f"synthetic word2vec, {args.words:,} x {args.dim}": measure("word2vec", synthetic, test, args.cap),
    }
    section = render(results, args)
    print(section.markdown())
    save_result(args.result, results, section)


def write_vectors(path: Path, n_words: int, dim: int) -> Path:
    """Random 2-6 character words of 6,000 common code points, random vectors (kept across runs)."""
    if path.exists():
        return path
    import numpy

    rng = numpy.random.default_rng(0)
    words = set()
    while len(words) < n_words:
        lengths = rng.integers(2, 7, size=n_words)
        codes = rng.integers(0x4E00, 0x4E00 + 6000, size=(n_words, 6))
        words.update("".join(map(chr, row[:n])) for row, n in zip(codes, lengths))
    words = sorted(words)[:n_words]
    with path.open("w", encoding="utf8") as file_:
        file_.write(f"{n_words} {dim}\n")
        for start in range(0, n_words, 10_000):
            block = rng.normal(size=(min(10_000, n_words - start), dim)).round(4)
            file_.writelines(f"{w} {' '.join(map(str, row))}\n" for w, row in zip(words[start:], block))
    return path


def measure(kind: str, path, data: Path, cap: int) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, kind, str(path), str(data), str(cap)],
                            cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"Failed: {kind}\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def render(results: dict, args: argparse.Namespace) -> Section:
    rows = [{"lexicon": name, "words": r["words"], "load s": round(r["load_s"], 1),
             "index build s": round(r["index_s"], 1),
             "peak RSS growth MB": round(r["peak_mb"]), "saved size MB": round(r["bytes_mb"]),
             "matching chars/s": round(r["chars_per_s"]), "words per char": round(r["pairs_per_char"], 2)}
            for name, r in results.items()]
    return Section("Lexicon loading and matching", "One child process per lexicon; matching: every character of "
                   f"Resume test, max_words_per_char {args.cap}.", [rows])


if __name__ == "__main__":
    main()
