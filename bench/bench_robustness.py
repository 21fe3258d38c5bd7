"""Resume NER: sentence-level robustness (Wang, Wang and Shen 2024, Table 4), side by side.

Usage: python bench/bench_robustness.py [--data ../shared/data/resume] [--out bench/runs/robustness]
       [--systems bilstm bilstm_sb tener tener_cl tener_cs tener_cs_sb bert bert_cs] [--max-steps 2500]
       [--bert-steps 500] [--window 2] [--beta 1.0] [--jobs 2] [--reuse] [--result NAME]

Trains each system on the train split (model chosen on dev), then scores it on the
test split alone and with adjacent test sentences joined: S-F1, P-F1, R-F1 and Asr
(spacy_cner.robustness.metrics). The CPU systems train for --max-steps, the random BERT ones
for --bert-steps with bench_transformer.py's schedule. With --reuse, a system whose
model and training stats are already in --out is not trained again (nor scored again
when its metrics are newer than its model).
"""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, Section, add_result_argument, prepare_corpus, run, save_result, train
from bench_transformer import our_config, training_schedule, write_random_bert

# key: (name in the table, config, extra overrides (formatted with the arguments), is a BERT system)
NO_SB = "--components.crf_ner.model.tok2vec.sentence_bigrams=false"
SYSTEMS = {
    "bilstm": ("BiLSTM-CRF (char_bigram.cfg, sentence_bigrams = false)", "char_bigram.cfg", [NO_SB], False),
    "bilstm_sb": ("BiLSTM-CRF (char_bigram.cfg: sentence_bigrams = true)", "char_bigram.cfg", [], False),
    "tener": ("TENER-CRF (tener.cfg, sentence_bigrams = false)", "tener.cfg", [NO_SB], False),
    "tener_cl": (
        "TENER-CRF + cl (entity_attention_scale = {beta})", "tener.cfg",
        [NO_SB, "--components.crf_ner.model.encoder.entity_attention_scale={beta}"], False,
    ),
    "tener_cs": (
        "TENER-CRF + cs (attention_window = {window})", "tener.cfg",
        [NO_SB, "--components.crf_ner.model.encoder.attention_window={window}"], False,
    ),
    "tener_cs_sb": (
        "TENER-CRF + cs (attention_window = {window}) + sentence_bigrams", "tener.cfg",
        ["--components.crf_ner.model.encoder.attention_window={window}"], False,
    ),
    "bert": ("random BERT-CRF (bert_crf.cfg)", "bert_crf.cfg", [], True),
    "bert_cs": (
        "random BERT-CRF + cs (attention_window = {window})", "bert_crf.cfg",
        ["--components.crf_ner.model.tok2vec.attention_window={window}"], True,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "resume")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "runs" / "robustness")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--max-steps", type=int, default=2500, help="training steps of the CPU systems")
    parser.add_argument("--bert-steps", type=int, default=500, help="training steps of the BERT systems")
    parser.add_argument("--layers", type=int, default=4, help="random BERT layers")
    parser.add_argument("--width", type=int, default=256, help="random BERT width")
    parser.add_argument("--window", type=int, default=2, help="w of the sliding-window constraint (cs)")
    parser.add_argument("--beta", type=float, default=1.0, help="beta of the entity-label enhancement (cl)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument("--reuse", action="store_true", help="keep systems already trained (and scored) in --out")
    add_result_argument(parser, "robustness")
    args = parser.parse_args()
    corpus = prepare_corpus(args.data, args.out)
    settings = {"window": args.window, "beta": args.beta}
    bert_dir = None
    if any(SYSTEMS[key][3] for key in args.systems):
        bert_dir = write_random_bert(args.data, args.out / "random-bert", args.layers, args.width)

    def train_run(key: str) -> dict:
        _, config_name, extra, is_bert = SYSTEMS[key]
        out = args.out / key
        stats_path = out / "training_stats.json"
        if args.reuse and stats_path.exists() and (out / "model-best").exists():
            return json.loads(stats_path.read_text())
        out.mkdir(parents=True, exist_ok=True)
        overrides = [item.format(**settings) for item in extra]
        config = ROOT / "configs" / config_name
        steps = args.max_steps
        if is_bert:
            config = our_config(config_name, {}, out / config_name)
            # bench_transformer.py's: a random encoder trains at the same rate as the layers above it.
            overrides += training_schedule(args.bert_steps, 5e-4) + [
                f"--vars.transformer={bert_dir}", "--components.crf_ner.tok2vec_learn_rate_scale=1.0"
            ]
            steps = args.bert_steps
        stats = train(config, corpus, out, args.seed, steps, args.jobs > 1, tuple(overrides))
        stats_path.write_text(json.dumps(stats))
        return stats

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        training = dict(zip(args.systems, pool.map(train_run, args.systems)))
    scores = {key: score(args.out / key, corpus, args.reuse) for key in args.systems}
    section = render(training, scores, settings, args)
    print(section.markdown())
    save_result(args.result, {"training": training, "scores": scores, "settings": settings}, section)


def score(system_dir: Path, corpus: Path, reuse: bool) -> dict:
    """The robustness command on the system's best model; its metrics.json (kept with --reuse)."""
    output = system_dir / "robustness"
    metrics = output / "metrics.json"
    if reuse and metrics.exists() and metrics.stat().st_mtime > (system_dir / "model-best").stat().st_mtime:
        return json.loads(metrics.read_text(encoding="utf8"))
    run([sys.executable, "-m", "spacy_cner", "robustness", str(system_dir / "model-best"),
         str(corpus / "test.spacy"), "--output", str(output)], quiet=True)
    return json.loads((output / "metrics.json").read_text(encoding="utf8"))


def render(training: dict, scores: dict, settings: dict, args: argparse.Namespace) -> Section:
    """The table's rows (one per system) and notes."""
    notes = (f"Seed {args.seed}; CPU systems {args.max_steps} steps, random BERT ({args.layers} layers, width "
             f"{args.width}) {args.bert_steps} steps; model chosen on dev; test split alone (S-F1) and as "
             "adjacent joined pairs (P-F1, R-F1, Asr).")
    rows = []
    for key in args.systems:
        metrics = scores[key]
        rows.append({
            "system": SYSTEMS[key][0].format(**settings), "S-F1": round(metrics["standard"]["f"] * 100, 2),
            "P-F1": round(metrics["perturbed"]["f"] * 100, 2), "R-F1": round(metrics["robust"]["f"] * 100, 2),
            "Asr %": round(metrics["attack_success_rate"] * 100, 3), "changed entities": len(metrics["changed"]),
            "training wall time min": round(training[key]["seconds"] / 60, 1),
        })
    return Section("Resume NER robustness (Table 4)", notes, [rows])


if __name__ == "__main__":
    main()
