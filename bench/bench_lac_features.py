"""Speed of spacy-cner.LacFeatures.v1 alone (LAC's tagger as a frozen encoder): chars/s on MSRA test sentences.

Each setting's layer runs over the same docs in batches, one thread, best of --repeats; the share of the time
spent on LAC's text analysis (dictionary segmentation into ids) is measured apart. Needs the LAC sdist (cached by
`python -m spacy_cner pretrained fetch`, or --sdist).

    python bench/bench_lac_features.py --sentences 2000
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Section, add_data_argument, add_result_argument, publish  # noqa: E402

SETTINGS = {
    "hidden + emissions": {},
    "hidden + emissions, projected to 64": {"projected_width": 64},
    "emissions only": {"hidden": False},
    "hidden + emissions, whole texts (window 256, not per sentence)": {"sentences": False},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(parser, "msra")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sdist", default=None, help="a local LAC-2.1.2.tar.gz (default: the cached one)")
    add_result_argument(parser, "lac_features_speed")
    args = parser.parse_args()
    torch.set_num_threads(1)

    import spacy
    from spacy.util import registry
    from thinc.api import Config

    import spacy_cner  # noqa: F401
    from spacy_cner.corpus.chars import read_sentences
    from spacy_cner.layers._torch import torch_module

    sentences = read_sentences(args.data / "test.char.bmes")
    texts = ["".join(sentence.tokens) for _, sentence in zip(range(args.sentences), sentences)]
    nlp = spacy.blank("zh")
    docs = [nlp.make_doc(text) for text in texts]
    n_chars = sum(len(text) for text in texts)
    batches = [docs[start : start + args.batch_size] for start in range(0, len(docs), args.batch_size)]
    rows, figures = [], {"sentences": len(texts), "chars": n_chars, "batch_size": args.batch_size, "settings": {}}
    encoder = None
    for name, settings in SETTINGS.items():
        block = "".join(f"{key} = {str(value).lower()}\n" for key, value in settings.items())
        sdist = f'sdist = "{args.sdist}"\n' if args.sdist else ""
        layer = registry.resolve(Config().from_str(f'[m]\n@layers = "spacy-cner.LacFeatures.v1"\n{block}{sdist}'))["m"]
        if encoder is not None:  # the sdist read once
            layer.shims[0]._model = encoder
        layer.initialize(X=docs[:10])
        encoder = torch_module(layer)
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for batch in batches:
                layer.predict(batch)
            seconds.append(time.perf_counter() - start)
        best = min(seconds)
        figures["settings"][name] = {
            "settings": settings,
            "seconds": best,
            "chars_per_s": n_chars / best,
            "width": layer.get_dim("nO"),
        }
        rows.append({"Setting": name, "Features per token": layer.get_dim("nO"), "Chars/s": round(n_chars / best)})
    start = time.perf_counter()
    for text in texts:
        encoder.tagger.ids(text)
    analysis = time.perf_counter() - start
    figures["text_analysis_chars_per_s"] = n_chars / analysis
    section = Section(
        f"LacFeatures.v1 alone: chars/s on {len(texts):,} MSRA test sentences ({n_chars:,} chars)",
        f"One thread, batches of {args.batch_size} docs, best of {args.repeats}. LAC's text analysis (dictionary "
        f"segmentation into ids) alone: {n_chars / analysis:,.0f} chars/s; the rest is the BiGRU network.",
        [rows],
    )
    load = os.getloadavg()[0]
    figures["load_average"] = load
    publish(
        args.result,
        figures,
        section,
        notes=f"Load average {load:.1f} at the end, on {os.cpu_count()} cores: "
        "on a shared machine the settings (of about equal cost: the BiGRU dominates) differ by its noise.",
    )


if __name__ == "__main__":
    main()
