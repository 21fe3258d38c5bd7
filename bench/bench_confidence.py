"""Entity probabilities of crf_ner: calibration (ECE), thresholds and cost, on every dataset.

Usage: python bench/bench_confidence.py [--runs bench/runs/datasets] [--datasets resume ecommerce youku taobao]
       [--system default] [--seed 0] [--repeats 3] [--long-chars 1000000] [--figure bench/reliability.png]
       [--result NAME]

Reads the models and corpora that bench_datasets.py trained and converted (run it first).
For each dataset: the expected calibration error (10 bins) of the predicted entities'
probabilities on dev and test, before and after fitting a temperature on dev
(crf_ner.fit_temperature); precision/recall/F1 on test when the best path's entities below a
threshold are left out; and the cost of the probabilities: inference chars/s over the test
texts decoding the best path without probabilities (spans_key and ents_threshold None), with
the span group, and as the default decodes (the span group and doc.ents at the model's fitted
threshold, no best path), alternating, on one thread. With --long-chars, one
doc of that many characters (test texts joined) is tagged with and without probabilities,
each in its own process: seconds and peak memory.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import ROOT, Section, add_result_argument, publish

THRESHOLDS = (0.0, 0.3, 0.5, 0.7, 0.9, 0.95)
RAW_OUTCOMES = ("dev_before", "dev_after", "test_before", "test_after")

CHILD = """
import json, sys, time
import numpy, spacy, torch
from spacy.tokens import DocBin
from spacy.training import Example
from spacy_cner.training.reliability import expected_calibration_error
torch.set_num_threads(1)
model, corpus, repeats, thresholds = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
nlp = spacy.load(model)
ner = nlp.get_pipe("crf_ner")
def examples(split):
    docs = DocBin().from_disk(f"{corpus}/{split}.spacy").get_docs(nlp.vocab)
    return [Example(nlp.make_doc(d.text), d) for d in docs]
dev, test = examples("dev"), examples("test")
dev_outcomes, test_outcomes = ner.entity_outcomes(dev), ner.entity_outcomes(test)
fit = ner.fit_temperature(dev)
t = fit["temperature"]
out = {"temperature": t, "n_dev": fit["n_entities"]}
for split, outcomes in (("dev", dev_outcomes), ("test", test_outcomes)):
    for name, temperature in (("before", 1.0), ("after", t)):
        probs, right = outcomes(temperature)
        out[f"ece_{split}_{name}"] = expected_calibration_error(probs, right)
        out[f"{split}_{name}"] = [probs.tolist(), right.tolist()]
n_gold = sum(len(eg.reference.ents) for eg in test)
probs, right = test_outcomes(t)
out["thresholds"] = []
for threshold in thresholds:
    kept = probs >= threshold
    tp, n_pred = float(right[kept].sum()), int(kept.sum())
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    out["thresholds"].append([threshold, p, r, 2 * p * r / (p + r) if p + r else 0.0])
texts = [eg.text for eg in test]
n_chars = sum(len(text) for text in texts)
fitted = ner.cfg.get("fitted_threshold")
settings = [("off", None, None), ("on", "crf_ner", None)] + ([("default", "crf_ner", fitted)] if fitted else [])
seconds = {setting: [] for setting, _, _ in settings}
for _ in range(repeats):
    for setting, key, threshold in settings:
        ner.spans_key, ner.ents_threshold = key, threshold
        start = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=256):
            pass
        seconds[setting].append(time.perf_counter() - start)
out["chars_per_s"] = {k: n_chars / min(v) for k, v in seconds.items()}
print(json.dumps(out))
"""

LONG_CHILD = """
import json, resource, sys, time
import spacy, torch
from spacy.tokens import DocBin
torch.set_num_threads(1)
model, corpus, n_chars, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
nlp = spacy.load(model)
ner = nlp.get_pipe("crf_ner")
ner.spans_key = None if key == "none" else key
ner.ents_threshold = None
texts = [d.text for d in DocBin().from_disk(f"{corpus}/test.spacy").get_docs(nlp.vocab)]
text = ""
while len(text) < n_chars:
    text += "".join(texts)
text = text[:n_chars]
nlp.max_length = len(text) + 1
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
doc = nlp(text)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "growth_mb": peak - base, "ents": len(doc.ents),
                  "spans": len(doc.spans[key]) if key != "none" else 0}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "bench" / "runs" / "datasets")
    parser.add_argument("--datasets", nargs="+", default=["resume", "ecommerce", "youku", "taobao"])
    parser.add_argument("--system", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--long-chars", type=int, default=0, help="0: no long-doc run")
    parser.add_argument("--figure", type=Path, default=None, help="reliability diagram (PNG; needs matplotlib)")
    add_result_argument(parser, None)
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    results = {}
    for name in args.datasets:
        model = args.runs / name / args.system / f"seed{args.seed}" / "model-best"
        corpus = args.runs / name / "corpus"
        if not model.exists():
            sys.exit(f"No model at {model}: run bench/bench_datasets.py for {name} first")
        results[name] = _child(CHILD, [str(model), str(corpus), str(args.repeats), json.dumps(THRESHOLDS)], env)
        if args.long_chars:
            results[name]["long"] = {
                key: _child(LONG_CHILD, [str(model), str(corpus), str(args.long_chars), key], env)
                for key in ("none", "crf_ner")
            }
    if args.figure:
        reliability_figure(results, args.figure)
    # Without the per-entity (probability, right) lists the reliability diagram is drawn from.
    figures = {name: {k: v for k, v in res.items() if k not in RAW_OUTCOMES} for name, res in results.items()}
    publish(args.result or "confidence_" + "-".join(args.datasets), figures, render(results, args))


def _child(code: str, argv: list, env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"Failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def reliability_figure(results: dict, path: Path) -> None:
    """Accuracy against mean probability per bin, on test, before and after the temperature."""
    from spacy_cner.training.reliability import reliability_bins

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("No matplotlib: no reliability diagram (pip install matplotlib)", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results), 3.4), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for key, style in (("test_before", "o-"), ("test_after", "s--")):
            bins = reliability_bins(*res[key])
            xs, ys = [b["mean_probability"] for b in bins], [b["precision"] for b in bins]
            label = "T = 1" if key == "test_before" else f"T = {res['temperature']:.2f}"
            ax.plot(xs, ys, style, label=f"{label} (ECE {res['ece_' + key]:.3f})", markersize=4)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
        ax.set_title(name)
        ax.set_xlabel("entity probability")
        ax.set_ylabel("share correct")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"Wrote {path}", file=sys.stderr)


def render(results: dict, args: argparse.Namespace) -> Section:
    notes = (
        f"Models: bench_datasets.py's `{args.system}` seed {args.seed} (model-best). ECE over the predicted "
        "entities (10 equal-width bins; right = exact match of a gold entity); the temperature is fitted on dev. "
        'Default: doc.ents at the model\'s fitted threshold (ents_threshold "fitted") and the span group, the '
        "configs' default; it computes no best path (empty: no fitted threshold). Cost: the time added, in %. "
        "Second table: test precision / recall / F1 when the best path's entities below the threshold are left "
        "out (at the fitted temperature)."
    )
    main_rows, threshold_rows, long_rows = [], [], []
    for name, res in results.items():
        speed = res["chars_per_s"]
        off, on, default = speed["off"], speed["on"], speed.get("default")
        main_rows.append(
            {
                "dataset": name,
                "temperature": round(res["temperature"], 2),
                "dev ECE before / after": [round(res["ece_dev_before"], 3), round(res["ece_dev_after"], 3)],
                "test ECE before / after": [round(res["ece_test_before"], 3), round(res["ece_test_after"], 3)],
                "chars/s: best path / + span group / default": [
                    round(off),
                    round(on),
                    round(default) if default else None,
                ],
                "cost %: + span group / default": [
                    round(100 * (off / on - 1)),
                    round(100 * (off / default - 1)) if default else None,
                ],
            }
        )
        threshold_rows.append(
            {
                "dataset": name,
                **{
                    f">= {t:g}": [round(100 * p, 1), round(100 * r, 1), round(100 * f, 1)]
                    for t, (_, p, r, f) in zip(THRESHOLDS, res["thresholds"])
                },
            }
        )
        if "long" in res:
            for key, label in (("none", "off"), ("crf_ner", "on")):
                r = res["long"][key]
                long_rows.append(
                    {
                        "dataset": name,
                        "probabilities": label,
                        "seconds": round(r["seconds"], 1),
                        "peak RSS MB": round(r["peak_mb"]),
                        "entities": r["ents"],
                        "scored spans": r["spans"],
                    }
                )
    if long_rows:
        notes += f" Third table: one doc of {args.long_chars:,} characters (test texts joined), one thread."
    return Section("Entity probabilities: calibration, thresholds, cost", notes, [main_rows, threshold_rows, long_rows])


if __name__ == "__main__":
    main()
