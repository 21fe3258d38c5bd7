"""The ready LAC pipeline's speed (`pretrained pipeline`), this checkout against an earlier commit's code, side by
side in one run on one thread: chars/s with nlp.pipe (batch_size 64) and with nlp(text) one text at a time, each
version in its own child process, rounds alternating (best of the rounds); and whether the two give the same
words, tags, entities and entity scores on LAC's reference texts and every dataset's test split.

    python bench/bench_lac_pipeline_speed.py --baseline 89754d8

The baseline's package is read from `git archive BASELINE spacy_cner` (nothing in the checkout changes); both
load the same pipeline folder (written by this checkout, or --pipeline).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Section, add_data_argument, add_result_argument, publish, run, run_child  # noqa: E402

# name: (file under --data, reader format); the reference texts come from the slow test's data.
TEST_SPLITS = {
    "msra": "msra/test.char.bmes",
    "resume": "resume/test.char.bmes",
    "ecommerce": "ecommerce/test.txt.bieos",
    "youku": "youku/test.txt",
    "taobao": "taobao/test.txt",
    "peoples_daily": "peoples_daily/example.test",
}
REFERENCE = ROOT / "tests" / "pretrained" / "data" / "lac_reference.json"

# One child: load the pipeline, then time nlp.pipe over the speed texts and nlp(text) over the first `timed`
# (process CPU time and wall time), or write every text's analysis to a file.
CHILD = r"""
import json, os, sys, time
sys.path[:] = [path for path in sys.path if path not in ("", os.getcwd())]  # PYTHONPATH's package, not the cwd's
import torch
torch.set_num_threads(1)
import spacy
pipeline, texts_path, mode, timed, out = sys.argv[1:6]
texts = json.load(open(texts_path, encoding="utf8"))
nlp = spacy.load(pipeline)
import spacy_cner
result = {"package": spacy_cner.__file__}
if mode == "speed":
    speed = texts["speed"]
    chars = sum(map(len, speed))
    list(nlp.pipe(speed[:64]))
    wall, cpu = time.perf_counter(), time.process_time()
    docs = list(nlp.pipe(speed, batch_size=64))
    result["pipe_wall"], result["pipe_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    alone = speed[: int(timed)]
    wall, cpu = time.perf_counter(), time.process_time()
    for text in alone:
        nlp(text)
    result["one_wall"], result["one_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    result["chars"], result["one_chars"] = chars, sum(map(len, alone))
else:
    with open(out, "w", encoding="utf8") as file:
        for name, split in texts["check"].items():
            for doc in nlp.pipe(split, batch_size=64):
                row = [name, [(t.text, t.tag_, t.whitespace_) for t in doc],
                       [(e.start_char, e.end_char, e.label_, e._.score) for e in doc.ents]]
                file.write(json.dumps(row, ensure_ascii=False) + "\n")
print("RESULT " + json.dumps(result))
"""


def split_texts(data: Path) -> dict:
    """Each test split's sentences as texts, and the reference texts."""
    from spacy_cner.corpus.chars import read_sentences

    texts = {"reference": [record["text"] for record in json.loads(REFERENCE.read_text("utf8"))["sentences"]]}
    for name, file in TEST_SPLITS.items():
        texts[name] = ["".join(sentence.tokens) for sentence in read_sentences(data / file, repair=True)]
    return texts


def lscpu() -> dict:
    """lscpu's fields (the CPU's model, cores, caches, frequencies)."""
    done = subprocess.run(["lscpu"], capture_output=True, text=True)
    return dict(
        (key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in done.stdout.splitlines())
    )


def compare(before_row, after_row) -> tuple:
    """(what differs, the largest entity score difference): "analysis" where the tokens, tags or entities do,
    "scores" where only entity scores do by more than 1e-6 (float rounding), else "same"."""
    if before_row[:2] != after_row[:2] or len(before_row[2]) != len(after_row[2]):
        return "analysis", None
    largest = 0.0
    for (*span_a, score_a), (*span_b, score_b) in zip(before_row[2], after_row[2]):
        if span_a != span_b:
            return "analysis", None
        largest = max(largest, abs(score_a - score_b))
    return ("scores" if largest > 1e-6 else "same"), largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(parser)
    parser.add_argument("--baseline", required=True, help="the commit whose spacy_cner is compared")
    parser.add_argument("--pipeline", type=Path, default=None, help="a pipeline folder (default: written here)")
    parser.add_argument("--speed-split", default="peoples_daily", help="the test split timed")
    parser.add_argument("--timed", type=int, default=500, help="texts timed one at a time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per version (alternating; best kept)")
    add_result_argument(parser, "lac_pipeline_speed")
    args = parser.parse_args()

    texts = split_texts(args.data)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        baseline = scratch / "baseline"
        baseline.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline, "spacy_cner"], cwd=ROOT, capture_output=True)
        if archive.returncode != 0:
            sys.exit(f"git archive {args.baseline}: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive.stdout, check=True)
        pipeline = args.pipeline
        if pipeline is None:
            pipeline = scratch / "zh_lac"
            run([sys.executable, "-m", "spacy_cner", "pretrained", "pipeline", str(pipeline)], quiet=True)
        texts_path = scratch / "texts.json"
        texts_path.write_text(
            json.dumps({"speed": texts[args.speed_split], "check": texts}, ensure_ascii=False), encoding="utf8"
        )
        versions = {"before": str(baseline), "after": str(ROOT)}
        env = {name: {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"} for name, path in versions.items()}
        rounds = {name: [] for name in versions}
        for _ in range(args.rounds):
            for name in versions:
                rounds[name].append(
                    run_child(CHILD, pipeline, texts_path, "speed", args.timed, "-", env=env[name], failure=name)
                )
        for name in versions:
            assert all(Path(r["package"]).is_relative_to(versions[name]) for r in rounds[name]), rounds[name]
        outputs = {name: scratch / f"{name}.jsonl" for name in versions}
        for name in versions:
            run_child(CHILD, pipeline, texts_path, "check", 0, outputs[name], env=env[name], failure=name)
        rows_of = {name: [json.loads(line) for line in outputs[name].open(encoding="utf8")] for name in versions}
    differing = {split: 0 for split in texts}
    score_only = {split: 0 for split in texts}
    largest_score_difference = {split: 0.0 for split in texts}
    for before_row, after_row in zip(rows_of["before"], rows_of["after"]):
        kind, largest = compare(before_row, after_row)
        split = before_row[0]
        if kind == "analysis":
            differing[split] += 1
            print(f"{split}: before {before_row[1:]}\n    after {after_row[1:]}", file=sys.stderr)
        else:
            score_only[split] += kind == "scores"
            largest_score_difference[split] = max(largest_score_difference[split], largest)
    assert len(rows_of["before"]) == len(rows_of["after"]) == sum(map(len, texts.values()))

    def best(name: str, key: str, chars: str) -> float:
        return max(r[chars] / r[key] for r in rounds[name])

    figures = {
        "baseline": args.baseline,
        "speed_split": args.speed_split,
        "rounds": rounds,
        "chars_per_s": {
            name: {
                "pipe_cpu": best(name, "pipe_cpu", "chars"),
                "pipe_wall": best(name, "pipe_wall", "chars"),
                "one_cpu": best(name, "one_cpu", "one_chars"),
                "one_wall": best(name, "one_wall", "one_chars"),
            }
            for name in versions
        },
        "texts_checked": {split: len(split_texts) for split, split_texts in texts.items()},
        "differing": differing,
        "scores_only": score_only,
        "largest_score_difference": largest_score_difference,
        "lscpu": lscpu(),
    }
    speed = figures["chars_per_s"]
    rows = [
        {
            "Code": f"{name} ({args.baseline if name == 'before' else 'this checkout'})",
            "nlp.pipe chars/s (CPU time)": round(speed[name]["pipe_cpu"]),
            "nlp.pipe chars/s (wall)": round(speed[name]["pipe_wall"]),
            "one at a time chars/s (CPU time)": round(speed[name]["one_cpu"]),
            "one at a time chars/s (wall)": round(speed[name]["one_wall"]),
        }
        for name in versions
    ]
    checks = [
        {
            "Texts": split,
            "Docs": len(texts[split]),
            "Differing": differing[split],
            "Scores only": score_only[split],
            "Largest score difference": f"{largest_score_difference[split]:.1e}",
        }
        for split in texts
    ]
    cpu = figures["lscpu"]
    section = Section(
        "The ready LAC pipeline's speed before and after, side by side",
        f"One thread; {args.speed_split}'s test split ({len(texts[args.speed_split]):,} sentences) through nlp.pipe "
        f"(batch_size 64), its first {args.timed} one at a time; best of {args.rounds} alternating rounds, each "
        f"version in its own process. CPU: {cpu.get('Model name', '?')}, {cpu.get('CPU(s)', '?')} CPUs. Differing: "
        "docs whose tokens, tags or entities differ between the two; scores only: docs whose entities are the same "
        "but an entity score differs by more than 1e-6; the largest score difference over the docs whose entities "
        "are the same.",
        [rows, checks],
    )
    publish(args.result, figures, section)


if __name__ == "__main__":
    main()
