"""The GPU path: bert-base-sized random BERT and NEZHA, trained and run with --gpu-id 0.

Usage: python bench/bench_gpu.py [--data ../shared/data/resume] [--out bench/runs/gpu] [--steps 300]
       [--layers 12] [--width 768] [--systems bert_crf nezha_df_at lebert] [--precisions fp32 mixed]
       [--evals 6] [--cpu-repeats 3] [--learn-rate 5e-5] [--encoder-rate-scale S] [--result NAME]
       python bench/bench_gpu.py --cpu-smoke   (tiny sizes, on the CPU: checks the script itself)

No pretrained weights can be downloaded here: each system fine-tunes a randomly
initialised encoder of bert-base size (12 layers, width 768, 12 heads; vocabulary: the
corpus's characters), built from a config as the tests build theirs, on Resume, for
--steps steps, in full and in mixed precision. Per run: training steps/s, peak GPU memory
(torch.cuda.max_memory_allocated in the training process), inference chars/s on the GPU
over the test texts, test F1, and the CPU-GPU agreement: the share of test docs whose
entities are the same when the saved model runs on the CPU. Without a CUDA GPU (and
CuPy) it says so and exits 0.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import ROOT, Section, add_data_argument, add_out_argument, add_result_argument, prepare_corpus, save_result
from bench_transformer import training_schedule, write_random_bert

# key: (name in the table, config, config overrides)
SYSTEMS = {
    "bert_crf": ("BERT-CRF (bert_crf.cfg)", "bert_crf.cfg", "bert", []),
    "nezha_df_at": (
        "NEZHA-BiLSTM-CRF + DF + FGM (nezha_bilstm_crf_df_at.cfg)",
        "nezha_bilstm_crf_df_at.cfg",
        "nezha",
        [],
    ),
    "lebert": ("LEBERT (lebert.cfg, jieba lexicon)", "lebert.cfg", "bert", []),
}

TRAIN_CHILD = """
import json, sys, time
import torch
from spacy.cli.train import train
from spacy_cner.cli.arguments import parse_config_overrides
use_gpu = int(sys.argv[3])
start = time.perf_counter()
train(sys.argv[1], sys.argv[2], overrides=parse_config_overrides(sys.argv[4:]), use_gpu=use_gpu)
seconds = time.perf_counter() - start
peak = torch.cuda.max_memory_allocated() / 2**20 if use_gpu >= 0 else 0.0
print("RESULT " + json.dumps({"seconds": seconds, "peak_gpu_mb": peak}))
"""

EVAL_CHILD = """
import json, sys, time
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
model, test, use_gpu, repeats, score = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
def entities(nlp, texts):
    return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=64)]
out = {}
if use_gpu >= 0:
    spacy.require_gpu(use_gpu)
nlp = spacy.load(model)
docs = list(DocBin().from_disk(test).get_docs(nlp.vocab))
texts = [d.text for d in docs]
if score:
    out["f"] = nlp.evaluate([Example(nlp.make_doc(d.text), d) for d in docs])["ents_f"]
entities(nlp, texts[:32])
best = None
for _ in range(repeats):
    start = time.perf_counter()
    found = entities(nlp, texts)
    seconds = time.perf_counter() - start
    best = seconds if best is None else min(best, seconds)
out["chars_per_s"] = sum(len(t) for t in texts) / best
out["entities"] = found
print("RESULT " + json.dumps(out), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser, "resume")
    add_out_argument(parser, "gpu")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "mixed"], default=["fp32", "mixed"])
    parser.add_argument("--evals", type=int, default=6, help="dev evaluations during training (each calibrates)")
    parser.add_argument(
        "--learn-rate",
        type=float,
        default=5e-5,
        help="initial_rate: the layers above the encoder (a BiLSTM, the CRF); the encoder gets the "
        "config's tok2vec_learn_rate_scale (0.5) times it, unless --encoder-rate-scale",
    )
    parser.add_argument(
        "--encoder-rate-scale",
        type=float,
        default=None,
        help="the encoder's rate as a multiple of --learn-rate (default: the config's)",
    )
    parser.add_argument(
        "--cpu-repeats",
        type=int,
        default=3,
        help="timed passes over the test texts on the CPU (the fastest is kept; the GPU's: 3)",
    )
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, to check the script")
    add_result_argument(parser, "gpu")
    args = parser.parse_args()
    gpu = -1 if args.cpu_smoke else 0
    if not args.cpu_smoke and not _has_cuda():
        print("No CUDA GPU with CuPy here (pip install 'spacy-cner[cuda]' on a GPU machine): nothing to measure.")
        return
    if args.cpu_smoke:
        args.steps, args.layers, args.width = 4, 2, 64
    if not (args.data / "train.char.bmes").exists():
        sys.exit(f"No Resume data in {args.data}: pass --data DIR (see its SOURCE.md)")
    corpus = prepare_corpus(args.data, args.out / "corpus")
    encoders = write_random_encoders(args.data, args.out, args.layers, args.width)
    precisions = ["fp32"] if args.cpu_smoke else args.precisions
    results = {}
    log = args.out / "children.log"
    for key in args.systems:
        name, config, encoder, extra = SYSTEMS[key]
        for precision in precisions:
            out = args.out / key / precision
            overrides = [
                f"--paths.train={corpus / 'train.spacy'}",
                f"--paths.dev={corpus / 'dev.spacy'}",
                f"--vars.transformer={encoders[encoder]}",
                f"--vars.mixed_precision={'true' if precision == 'mixed' else 'false'}",
                f"--training.max_steps={args.steps}",
                "--training.max_epochs=0",
                *training_schedule(args.steps, args.learn_rate),
                *(
                    [f"--components.crf_ner.tok2vec_learn_rate_scale={args.encoder_rate_scale}"]
                    if args.encoder_rate_scale is not None
                    else []
                ),
                f"--training.eval_frequency={max(1, args.steps // max(1, args.evals))}",
                *extra,
            ]
            stats = _child(TRAIN_CHILD, [str(ROOT / "configs" / config), str(out), str(gpu), *overrides], log)
            on_gpu = _child(EVAL_CHILD, [str(out / "model-best"), str(corpus / "test.spacy"), str(gpu), "3", "1"], log)
            on_cpu = _child(
                EVAL_CHILD, [str(out / "model-best"), str(corpus / "test.spacy"), "-1", str(args.cpu_repeats), "0"], log
            )
            same = sum(a == b for a, b in zip(on_gpu["entities"], on_cpu["entities"])) / max(1, len(on_gpu["entities"]))
            results[f"{key}/{precision}"] = {
                "name": name,
                "precision": precision,
                "steps_per_s": args.steps / stats["seconds"],
                "peak_gpu_mb": stats["peak_gpu_mb"],
                "chars_per_s": on_gpu["chars_per_s"],
                "cpu_chars_per_s": on_cpu["chars_per_s"],
                "f": on_gpu["f"],
                "agreement": same,
            }
            print(json.dumps({key: results[f"{key}/{precision}"]}), file=sys.stderr)
            # What has finished so far, kept if a time limit cuts the later runs off.
            (args.out / "partial_results.json").write_text(json.dumps(results, indent=1), encoding="utf8")
    section = render(results, args)
    print(section.markdown())
    if not args.cpu_smoke:
        save_result(args.result, results, section)


def write_random_encoders(data: Path, out: Path, layers: int, width: int) -> dict:
    """{"bert": ..., "nezha": ...}: a random BERT and NEZHA of this size in out (bert-LxW, nezha-LxW)."""
    return {
        "bert": write_random_bert(data, out / f"bert-{layers}x{width}", layers, width),
        "nezha": write_random_nezha(data, out / f"nezha-{layers}x{width}", layers, width),
    }


def write_random_nezha(data: Path, path: Path, layers: int, width: int) -> Path:
    """A randomly initialised NEZHA with BERT's vocabulary of the corpus's characters."""
    import torch
    from transformers import BertTokenizerFast, NezhaConfig, NezhaModel

    bert = write_random_bert(data, path, layers, width)  # the vocabulary and tokenizer files
    torch.manual_seed(0)
    vocab_size = len((bert / "vocab.txt").read_text(encoding="utf8").splitlines())
    config = NezhaConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        intermediate_size=4 * width,
        max_relative_position=64,
    )
    NezhaModel(config).save_pretrained(str(path))
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(str(path))
    return path


def _has_cuda() -> bool:
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _child(code: str, argv: list, log: Path) -> dict:
    """Run one step in a fresh process writing all its output to LOG as it runs (a run cut off
    by a time limit still shows how far it got); the step's JSON is its line starting "RESULT "."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0
    with log.open("a", encoding="utf8") as output:
        output.write(f"\n$ {' '.join(argv[:3])}\n")
        output.flush()
        result = subprocess.run(
            [sys.executable, "-c", code, *argv], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
    if result.returncode != 0:
        sys.exit(f"Failed ({result.returncode}): see {log}")
    with log.open(encoding="utf8") as output:
        output.seek(start)
        found = [line for line in output if line.startswith("RESULT ")]
    return json.loads(found[-1][len("RESULT ") :])


def render(results: dict, args: argparse.Namespace) -> Section:
    notes = (
        f"GPU: {_gpu_name()}. Random {args.layers}-layer, width-{args.width} encoders (no pretrained weights), "
        f"{args.steps} steps on Resume (initial_rate {args.learn_rate:g}, the encoder at "
        f"{'the config' + chr(39) + 's 0.5' if args.encoder_rate_scale is None else args.encoder_rate_scale} "
        f"times it); {args.evals} dev evaluations (each calibrating) inside training's time; GPU chars/s: the "
        f"fastest of 3 passes, CPU chars/s: of {args.cpu_repeats}; agreement: test docs with the same entities "
        f"on the CPU."
    )
    rows = [
        {
            "system": r["name"],
            "precision": r["precision"],
            "steps/s": round(r["steps_per_s"], 2),
            "peak GPU memory MB": round(r["peak_gpu_mb"]),
            "inference chars/s (GPU)": round(r["chars_per_s"]),
            "(CPU)": round(r["cpu_chars_per_s"]),
            "test F1": round(100 * r["f"], 2),
            "CPU-GPU agreement %": round(100 * r["agreement"], 1),
        }
        for r in results.values()
    ]
    return Section("GPU: bert-base-sized random encoders (spacy train --gpu-id 0)", notes, [rows])


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    except ImportError:
        return "no GPU"


if __name__ == "__main__":
    main()
