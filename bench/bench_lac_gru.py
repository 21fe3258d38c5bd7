"""LAC's BiGRU layers (pretrained/lac_net.py) against an earlier revision of them, side by side: the tagger's network
over MSRA test sentences (LAC's own ids, sorted by length in the groups LacFeatures runs), one thread.

Predicting: the network of this checkout and the one of --against (its lac_net.py read from git, the same weights),
alternating, best of --repeats, and the largest difference between their states. Training (a fine-tuned LAC,
LacFeatures.v2): forward and backward of this checkout's layers (BiGRUScan) against --against's and against autograd
over PaddleGRU's steps (one direction at a time, the plain reference), the same groups. --group-size cuts the groups
smaller: a training batch's (500-2,000 characters), or 1 for one text at a time. Needs the LAC sdist (cached by
`python -m spacy_cner pretrained fetch`, or --sdist).

    python bench/bench_lac_gru.py --against 3b6e446 --sentences 2000
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Section, add_data_argument, add_result_argument, module_at, publish  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(parser, "msra")
    parser.add_argument("--against", default="3b6e446", help="the git revision to compare with")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--train-repeats", type=int, default=2)
    parser.add_argument(
        "--group-size", type=int, default=0, help="cut the groups to this many sentences (0: LacFeatures' groups)"
    )
    parser.add_argument("--sdist", default=None, help="a local LAC-2.1.2.tar.gz (default: the cached one)")
    add_result_argument(parser, "lac_gru_speed")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from spacy_cner.corpus.chars import read_sentences
    from spacy_cner.pretrained.lac import open_lac
    from spacy_cner.pretrained.lac_analyzer import length_groups, tagger_from_sdist

    then = module_at(
        args.against,
        "spacy_cner/pretrained/lac_net.py",
        "lac_net_then",
        [("from ..backends.viterbi import", "from spacy_cner.backends.viterbi import")],
    )
    tagger = tagger_from_sdist(open_lac(args.sdist))
    network = tagger.network
    old = then.LacNetwork(*network.embedding.weight.shape, network.layers[0].forward_gru.hidden_width, 49)
    old.load_state_dict(network.state_dict())
    sentences = read_sentences(args.data / "test.char.bmes")
    texts = ["".join(sentence.tokens) for _, sentence in zip(range(args.sentences), sentences)]
    sequences = [tagger.ids(text)[0] for text in texts]
    n_chars, n_ids = sum(map(len, texts)), sum(map(len, sequences))
    batches = []
    groups = length_groups([len(ids) for ids in sequences])
    if args.group_size:
        groups = [group[i : i + args.group_size] for group in groups for i in range(0, len(group), args.group_size)]
    for group in groups:
        lengths = torch.tensor([len(sequences[i]) for i in group])
        padded = torch.zeros(len(group), int(lengths.max()), dtype=torch.long)
        for row, i in enumerate(group):
            padded[row, : lengths[row]] = torch.tensor(sequences[i])
        batches.append((padded, lengths))

    def predict(net) -> float:
        start = time.perf_counter()
        with torch.no_grad():
            for padded, lengths in batches:
                net.encode(padded, lengths)
        return time.perf_counter() - start

    predict_seconds = {"now": [], "then": []}
    for repeat in range(args.repeats):  # each first in turn
        for name in ("now", "then") if repeat % 2 == 0 else ("then", "now"):
            predict_seconds[name].append(predict(network if name == "now" else old))
    difference = 0.0
    with torch.no_grad():
        for padded, lengths in batches:
            mask = (torch.arange(padded.shape[1])[None] < lengths[:, None]).unsqueeze(-1)
            a, b = network.encode(padded, lengths)[0], old.encode(padded, lengths)[0]
            difference = max(difference, float(((a - b) * mask).abs().max()))

    def reference_layer(layer, inputs, lengths):
        return torch.cat(
            [
                layer.forward_gru(layer.forward_fc(inputs), lengths),
                layer.backward_gru(layer.backward_fc(inputs), lengths),
            ],
            dim=-1,
        )

    def train(net, plain: bool) -> float:
        net.set_trainable(True, [True, True], True)
        start = time.perf_counter()
        for padded, lengths in batches:
            hidden = net.embedding(padded)
            for layer in net.layers:
                hidden = reference_layer(layer, hidden, lengths) if plain else layer(hidden, lengths)
            net.emission(hidden).sum().backward()
        seconds = time.perf_counter() - start
        net.set_trainable(False, [False, False], False)
        net.zero_grad(set_to_none=True)
        return seconds

    train_seconds = {"BiGRUScan": [], "BiGRUScan then": [], "autograd": []}
    for repeat in range(args.train_repeats):  # this checkout's and --against's each first in turn
        for name in ("BiGRUScan", "BiGRUScan then") if repeat % 2 == 0 else ("BiGRUScan then", "BiGRUScan"):
            train_seconds[name].append(train(network if name == "BiGRUScan" else old, False))
        train_seconds["autograd"].append(train(network, True))
    best = {name: min(values) for name, values in {**predict_seconds, **train_seconds}.items()}
    rows = [
        {
            "Pass": "predict, this checkout",
            "Chars/s": round(n_chars / best["now"]),
            "x": round(best["then"] / best["now"], 2),
        },
        {"Pass": f"predict, {args.against}", "Chars/s": round(n_chars / best["then"]), "x": 1.0},
        {
            "Pass": "train (forward + backward), BiGRUScan",
            "Chars/s": round(n_chars / best["BiGRUScan"]),
            "x": round(best["autograd"] / best["BiGRUScan"], 2),
        },
        {
            "Pass": f"train, BiGRUScan of {args.against}",
            "Chars/s": round(n_chars / best["BiGRUScan then"]),
            "x": round(best["autograd"] / best["BiGRUScan then"], 2),
        },
        {"Pass": "train, autograd over PaddleGRU", "Chars/s": round(n_chars / best["autograd"]), "x": 1.0},
    ]
    figures = {
        "sentences": len(texts),
        "chars": n_chars,
        "ids": n_ids,
        "groups": len(batches),
        "group_size": args.group_size,
        "against": args.against,
        "seconds": {**predict_seconds, **train_seconds},
        "max_state_difference": difference,
        "load_average": os.getloadavg()[0],
    }
    section = Section(
        f"LAC's network ({len(texts):,} MSRA test sentences, {n_chars:,} chars, {n_ids:,} LAC ids): this checkout "
        f"against {args.against}",
        f"One thread, the two alternating, best of {args.repeats} (training: {args.train_repeats}); groups of "
        f"{args.group_size or 'LacFeatures size'}; the largest "
        f"difference between the two predictions' top states: {difference:.1e}.",
        [rows],
    )
    publish(args.result, figures, section, notes=f"Load average {figures['load_average']:.1f} at the end.")


if __name__ == "__main__":
    main()
