"""Resume NER with a small random BERT: our BERT-CRF, +DF, +DF+AT vs spacy-transformers + spaCy ner.

Usage: python bench/bench_transformer.py [--data ../shared/data/resume] [--out bench/runs/transformer]
       [--layers 4] [--width 256] [--max-steps 1500] [--jobs 1] [--result NAME]

No pretrained weights can be downloaded here, so every system fine-tunes the same
randomly initialised BERT (its vocabulary: the corpus's characters), for the same
number of steps with the same learning-rate schedule (linear warm-up over 5% of the
steps, then linear decay), batch size and dropout. It measures what the architectures
add on top of one encoder, and the cost of each, not the accuracy of a pretrained model.
"""

import argparse
import sys
from pathlib import Path

from _common import (
    ROOT,
    Section,
    add_data_argument,
    add_out_argument,
    add_result_argument,
    evaluate,
    prepare_corpus,
    publish,
    run,
    run_all,
    train_once,
)

# key: (name in the table, config, settings the config text gets)
SYSTEMS = {
    "crf": ("spacy-cner BERT-CRF (configs/bert_crf.cfg)", "bert_crf.cfg", {}),
    "df": ("spacy-cner BERT-CRF + DF (scalar mix)", "bert_crf.cfg", {"scalar_mix": True}),
    "df_at": ("spacy-cner BERT-CRF + DF + AT (FGM)", "bert_crf.cfg", {"scalar_mix": True, "fgm": True}),
    "spacy": ("spacy-transformers transformer + spaCy ner (init config -p ner -G)", None, {}),
}
FGM_BLOCK = '\n[components.crf_ner.adversarial]\n@misc = "spacy-cner.fgm.v1"\nepsilon = 1.0\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser, "resume")
    add_out_argument(parser, "transformer")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--max-steps", type=int, default=1500)
    parser.add_argument("--learn-rate", type=float, default=5e-4, help="peak rate for every system")
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time; > 1 runs each on one thread")
    parser.add_argument("--repeats", type=int, default=3, help="inference passes over test per model")
    add_result_argument(parser, "transformer_cpu")
    args = parser.parse_args()
    corpus = prepare_corpus(args.data, args.out)
    model_dir = write_random_bert(args.data, args.out / "random-bert", args.layers, args.width)
    schedule = training_schedule(args.max_steps, args.learn_rate)
    runs = {}
    for key in args.systems:
        name, config_name, settings = SYSTEMS[key]
        if config_name is None:
            config = spacy_transformers_config(args.out / "spacy_trf_ner.cfg")
            extra = schedule + [
                f"--components.transformer.model.name={model_dir}",
                "--training.accumulate_gradient=1",
                "--training.batcher.discard_oversize=false",
            ]
        else:
            config = our_config(config_name, settings, args.out / f"{key}.cfg")
            extra = random_bert_overrides(args.max_steps, args.learn_rate, model_dir)
        runs[key] = (config, extra)

    def train_run(key: str) -> dict:
        config, extra = runs[key]
        return train_once(config, corpus, args.out / key, 0, args.max_steps, args.jobs > 1, tuple(extra), reuse=False)

    training = run_all(train_run, list(args.systems), args.jobs)
    models = {key: args.out / key / "model-best" for key in args.systems}
    scores = evaluate(models, list(args.systems), corpus, args.repeats)
    publish(args.result, {"training": training, "scores": scores}, render(training, scores, args))


def training_schedule(steps: int, learn_rate: float) -> list:
    """The same schedule for every system: linear warm-up over 5% of the steps, linear decay."""
    return [
        f"--training.optimizer.learn_rate.initial_rate={learn_rate}",
        f"--training.optimizer.learn_rate.warmup_steps={max(1, steps // 20)}",
        f"--training.optimizer.learn_rate.total_steps={steps}",
        "--training.dropout=0.1",
        "--training.batcher.size=2000",
        f"--training.eval_frequency={max(1, steps // 6)}",
    ]


def random_bert_overrides(steps: int, learn_rate: float, bert_dir: Path) -> list:
    """training_schedule, the random encoder in bert_dir, and its learning rate that of the layers above it
    (a random encoder has nothing to keep)."""
    return training_schedule(steps, learn_rate) + [
        f"--vars.transformer={bert_dir}",
        "--components.crf_ner.tok2vec_learn_rate_scale=1.0",
    ]


def write_random_bert(data: Path, path: Path, layers: int, width: int) -> Path:
    """A randomly initialised BERT whose vocabulary is every character of the corpus."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    characters = set()
    for split in ("train", "dev", "test"):
        for line in (data / f"{split}.char.bmes").read_text(encoding="utf8").splitlines():
            if line.strip():
                characters.add(line.split()[0])
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(characters)
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf8")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        intermediate_size=4 * width,
    )
    BertModel(config).save_pretrained(str(path))
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(str(path))
    return path


def our_config(config_name: str, settings: dict, path: Path) -> Path:
    text = (ROOT / "configs" / config_name).read_text(encoding="utf8")
    if settings.get("scalar_mix"):
        text = text.replace("scalar_mix = false", "scalar_mix = true")
    if settings.get("fgm"):
        text = text.replace("tok2vec_learn_rate_scale = 0.5\n", "tok2vec_learn_rate_scale = 0.5\n" + FGM_BLOCK)
    path.write_text(text, encoding="utf8")
    return path


def spacy_transformers_config(path: Path) -> Path:
    """spaCy's transformer NER config for Chinese, as `spacy init config -G` writes it."""
    run(
        [sys.executable, "-m", "spacy", "init", "config", str(path), "-l", "zh", "-p", "ner", "-G", "--force"],
        quiet=True,
    )
    return path


def render(training: dict, scores: dict, args: argparse.Namespace) -> Section:
    rows = [
        {
            "system": SYSTEMS[key][0],
            "test P": round(scores[key]["p"] * 100, 2),
            "test R": round(scores[key]["r"] * 100, 2),
            "test F1": round(scores[key]["f"] * 100, 2),
            "training wall time min": round(training[key]["seconds"] / 60, 1),
            "training peak RSS MB": round(training[key]["peak_mb"]),
            "inference chars/s": round(scores[key]["chars_per_s"]),
        }
        for key in args.systems
    ]
    return Section(
        f"Resume NER, random {args.layers}-layer BERT (width {args.width}), {args.max_steps} steps",
        "Test split, model chosen on dev. Inference: `nlp.pipe(batch_size=256)` over the test texts, "
        f"best of {args.repeats} passes, the systems alternating.",
        [rows],
    )


if __name__ == "__main__":
    main()
