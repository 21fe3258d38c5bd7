"""The best path against the fitted entity threshold, on the same trained models.

Usage: python bench/bench_threshold.py [--runs bench/runs/datasets] [--datasets resume ecommerce youku taobao]
       [--system default] [--seeds 0 1 2] [--jobs 2] [--result NAME] [--title TEXT]

Takes the models that bench/bench_datasets.py trained (RUNS/<dataset>/<system>/seed<N>/model-best,
their corpora in RUNS/<dataset>/corpus) and saves two copies of each that differ only in how
`crf_ner` decodes doc.ents: the best tag sequence (ents_threshold null) and the threshold fitted
on dev (ents_threshold "fitted", crf_ner.fit_threshold: half the dev F1 of the best path, at the
temperature the model was saved with). Each copy is scored on test alone and in adjacent joined
pairs by `python -m spacy_cner robustness` (S-F1 = test F1, R-F1, Asr). No training: the decoding
is the only difference.
"""
import argparse
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, SYSTEMS, Section, add_result_argument, save_result
from bench_robustness import score as robustness_score

DECODINGS = {"best path": None, "fitted threshold": "fitted"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "bench" / "runs" / "datasets")
    parser.add_argument("--datasets", nargs="+", default=["resume", "ecommerce", "youku", "taobao"])
    parser.add_argument("--system", default="default", choices=[key for key in SYSTEMS if key != "spacy"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="robustness runs at a time, one thread each")
    add_result_argument(parser, None)
    parser.add_argument("--title", default="", help="what the runs are, for the table's heading")
    args = parser.parse_args()
    runs = [(name, seed) for name in args.datasets for seed in args.seeds]
    missing = [str(args.runs / name / args.system / f"seed{seed}" / "model-best") for name, seed in runs
               if not (args.runs / name / args.system / f"seed{seed}" / "model-best").exists()]
    if missing:
        sys.exit(f"No trained model at {', '.join(missing)}: run bench/bench_datasets.py first")
    fitted = {run: save_copies(args.runs / run[0], args.runs / run[0] / args.system / f"seed{run[1]}") for run in runs}
    jobs = [(run, decoding) for run in runs for decoding in DECODINGS]

    def robustness(job: tuple) -> dict:
        (name, seed), decoding = job
        system_dir = args.runs / name / args.system / f"seed{seed}" / f"decoding-{DECODINGS[decoding] or 'best'}"
        return robustness_score(system_dir, args.runs / name / "corpus", reuse=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        metrics = dict(zip(jobs, pool.map(robustness, jobs)))
    section = render(metrics, fitted, args)
    print(section.markdown())
    save_result(args.result or f"threshold_{args.runs.name}", {"metrics": metrics, "fitted": fitted}, section)


def save_copies(dataset_dir: Path, run_dir: Path) -> dict:
    """Save the run's model-best decoding with the best path and with the threshold fitted on
    dev; the fit (threshold, best-path dev F1)."""
    import spacy
    from spacy.training import Corpus
    from spacy.util import load_config

    nlp = spacy.load(run_dir / "model-best")
    ner = nlp.get_pipe("crf_ner")
    fit = ner.fit_threshold(Corpus(str(dataset_dir / "corpus" / "dev.spacy"))(nlp))
    for value in DECODINGS.values():
        out = run_dir / f"decoding-{value or 'best'}" / "model-best"
        if (out / "config.cfg").exists() and out.stat().st_mtime > (run_dir / "model-best").stat().st_mtime:
            continue  # saved by an earlier run: its robustness scores are kept
        out.mkdir(parents=True, exist_ok=True)
        nlp.to_disk(out)
        # ents_threshold is a factory setting: the saved config decides how the copy decodes.
        config = load_config(out / "config.cfg", interpolate=False)
        config["components"]["crf_ner"]["ents_threshold"] = value
        config.to_disk(out / "config.cfg")
    return fit


def render(metrics: dict, fitted: dict, args: argparse.Namespace) -> Section:
    rows, deltas = [], []
    for name in args.datasets:
        runs = [(name, seed) for seed in args.seeds]

        def mean(decoding: str, *keys: str) -> float:
            values = []
            for run in runs:
                value = metrics[(run, decoding)]
                for key in keys:
                    value = value[key]
                values.append(value * 100)
            return statistics.mean(values)

        def prf(decoding: str) -> list:
            return [round(mean(decoding, "standard", key), 2) for key in ("p", "r", "f")]

        per_seed = [(metrics[(run, "fitted threshold")]["standard"]["f"]
                     - metrics[(run, "best path")]["standard"]["f"]) * 100
                    for run in runs]
        deltas.extend(per_seed)
        rows.append({
            "dataset": name, "threshold": round(statistics.mean(fitted[run]["threshold"] for run in runs), 3),
            "best path P / R / F1": prf("best path"), "fitted P / R / F1": prf("fitted threshold"),
            "ΔF1": round(statistics.mean(per_seed), 2), "ΔF1 per seed": [round(d, 2) for d in per_seed],
            "R-F1 best / fitted": [round(mean("best path", "robust", "f"), 2),
                                   round(mean("fitted threshold", "robust", "f"), 2)],
            "Asr % best / fitted": [round(mean("best path", "attack_success_rate"), 2),
                                    round(mean("fitted threshold", "attack_success_rate"), 2)],
        })
    notes = (f"Models: {SYSTEMS[args.system][0]}, seeds {', '.join(map(str, args.seeds))}, from `{args.runs}` "
             "(bench/bench_datasets.py); each decoded both ways. Test split alone (P, R, F1) and in adjacent joined "
             "pairs (R-F1, Asr): means over seeds. "
             f"ΔF1 over all {len(deltas)} models: mean {statistics.mean(deltas):+.2f}, "
             f"least {min(deltas):+.2f}, most {max(deltas):+.2f}.")
    return Section(f"Entity threshold fitted on dev against the best path{': ' + args.title if args.title else ''}",
                   notes, [rows])


if __name__ == "__main__":
    main()
