"""The transformer path's ceiling: chars/s of a BERT-CRF pipeline whose encoder costs next to nothing.

Usage: python bench/bench_transformer_ceiling.py [--configs bert_crf bert_bilstm_crf] [--layers 2] [--width 64]
       [--steps 30] [--code base=/tmp/base new=.] [--rounds 3] [--profile] [--data ../shared/data/resume]
       [--out bench/runs/transformer_ceiling] [--result NAME]

Each config gets a random tiny BERT (--layers layers of width --width, its vocabulary the corpus's characters:
no hub), is trained --steps steps on Resume's train sentences and saved. Then every code version (--code
NAME=DIR: a checkout, e.g. a git worktree of an earlier commit; default this one) loads the same saved
pipeline in a child process on one thread and tags Resume's test texts: with nlp.pipe (the config's batch
size) and one text at a time, best of --rounds passes, the versions alternating within each round. The
children also write the predictions (entities and the span group's probabilities), compared across versions:
the same entities, and the largest difference of a probability. With --profile, each version's nlp.pipe
pass runs once more with the STAGES functions timed (callees included, no profiler), and once under
cProfile, where the time of every function is charged to a part of the work (PARTS: the first rule its file
and name match; functions that match none, such as torch's and numpy's built-ins, are charged to their
callers), in microseconds per character: cProfile's own cost per call inflates the parts made of many Python
calls (about 2x), the timed stages do not. Times are the process's CPU time (time.process_time), so that a
shared machine's waits are left out; the wall clock's chars/s are shown beside them.
"""

from _common import ROOT, Section, add_data_argument, add_out_argument, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# (part, substrings of a function's file path, function names or None for any): the first rule that matches a
# function charges its own time to the part; a function no rule matches passes its time to its callers.
PARTS = [
    ("encoder (torch modules)", ("transformers/models/", "torch/nn/modules/rnn.py"), None),
    ("tokenizer calls (HF fast tokenizer)", ("transformers/tokenization_utils", "tokenizers/"), None),
    (
        "alignment (offsets -> tokens, rows)",
        ("layers/transformer/wordpieces.py", "layers/transformer/alignment.py"),
        None,
    ),
    (
        "windows and padded batches",
        ("layers/transformer/batch.py", "spacy_cner/long_docs.py", "backends/batching.py"),
        None,
    ),
    (
        "transformer glue (shims, copies)",
        ("layers/transformer/", "spacy_transformers/", "thinc/shims/", "layers/_torch.py"),
        None,
    ),
    ("CRF Viterbi", ("backends/viterbi.py", "layers/crf.py"), None),
    ("CRF forward-backward, span probabilities", ("backends/forward_backward.py", "layers/crf_posteriors.py"), None),
    (
        "emission layers (thinc: linear, mean, BiLSTM glue)",
        ("thinc/", "spacy_cner/architectures.py", "layers/bilstm"),
        None,
    ),
    ("decoding and annotations (per-doc Python)", ("pipeline/", "spacy_cner/tags.py"), None),
    ("Doc building (the tokenizer)", ("spacy_cner/tokenizer.py", "spacy/lang/"), None),
    ("spaCy's pipe loop", ("spacy/language.py", "spacy/util.py"), None),
    # Generic code: charged to whoever called it (a Doc's tokens iterated by the alignment are the alignment's).
    (None, ("spacy/", "torch/nn/", "torch/autograd/", "torch/utils/", "numpy/"), None),
    ("torch's Python (dispatch, autocast)", ("torch/",), None),
]
OTHER = "other"
# (module, function or Class.method, label): what --profile also times without a profiler (the time of each
# call, its callees' included: the label's indent shows what holds what), the functions of either version.
STAGES = [
    ("spacy_cner.pipeline.crf_ner", "CRFEntityRecognizer.predict", "crf_ner.predict"),
    ("spacy_cner.pipeline.decoding", "segment_emissions", "  emission scores (the model's forward)"),
    ("spacy_cner.layers.transformer.model", "plan_doc", "    tokenizer calls and alignment (plan_doc)"),
    ("spacy_cner.layers.transformer.model", "plan_docs", "    tokenizer call and alignment (plan_docs)"),
    ("spacy_cner.layers.transformer.model", "window_batch", "    padded windows (window_batch)"),
    ("spacy_cner.layers.transformer.model", "token_rows", "    token rows (token_rows)"),
    ("spacy_cner.pipeline.decoding", "crf_decode", "  CRF Viterbi (crf_decode)"),
    ("spacy_cner.pipeline.decoding", "entity_probabilities", "  CRF forward-backward, span probabilities"),
    ("spacy_cner.pipeline.crf_ner", "CRFEntityRecognizer.set_annotations", "crf_ner.set_annotations"),
]

CHILD = r"""
import json, sys, time
import spacy, torch
import spacy_cner
torch.set_num_threads(1)
model, test, mode, rounds, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
from spacy_cner.corpus.chars import read_sentences
texts = ["".join(s.tokens) for s in read_sentences(test)]
nlp = spacy.load(model)
key = nlp.get_pipe("crf_ner").spans_key
def predictions(docs):
    return [[[(e.start_char, e.end_char, e.label_) for e in d.ents],
             [(s.start_char, s.end_char, s.label_, float(p))
              for s, p in zip(d.spans[key], d.spans[key].attrs["scores"])] if key else []] for d in docs]
def best(run):  # the least CPU time of the process (a shared machine's waits left out) and its wall time
    times = []
    for _ in range(rounds):
        start, wall = time.process_time(), time.perf_counter(); docs = run()
        times.append((time.process_time() - start, time.perf_counter() - wall))
    return min(times), docs
list(nlp.pipe(texts[:64]))  # warm-up
n_chars = sum(map(len, texts))
result = {"code": spacy_cner.__file__, "n_texts": len(texts), "n_chars": n_chars, "batch_size": nlp.batch_size}
if mode == "time":
    (seconds, wall), docs = best(lambda: list(nlp.pipe(texts)))
    result["pipe_chars_per_s"], result["pipe_wall_chars_per_s"] = n_chars / seconds, n_chars / wall
    (seconds, wall), single = best(lambda: [nlp(text) for text in texts])
    result["single_chars_per_s"], result["single_wall_chars_per_s"] = n_chars / seconds, n_chars / wall
    json.dump({"pipe": predictions(docs), "single": predictions(single)}, open(out, "w"), ensure_ascii=False)
elif mode == "stages":
    import functools, importlib
    seconds = {}
    def timed(owner, name, label):
        inner = getattr(owner, name, None)
        if inner is None:
            return
        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.process_time() - start
        setattr(owner, name, wrapper)
    for module, name, label in STAGES:
        owner = importlib.import_module(module)
        for part in name.split(".")[:-1]:
            owner = getattr(owner, part)
        timed(owner, name.split(".")[-1], label)
    hf = nlp.get_pipe("crf_ner").model.get_ref("tok2vec").get_ref("transformer").shims[0]._model
    timed(hf, "forward", "    encoder (the Hugging Face model's forward)")
    timed(nlp, "tokenizer", "Doc building (the tokenizer)")
    list(nlp.pipe(texts))
    seconds.clear()
    start = time.process_time()
    list(nlp.pipe(texts))
    seconds["total (nlp.pipe)"] = time.process_time() - start
    result["stages"] = seconds
else:
    import cProfile
    profiler = cProfile.Profile(time.process_time)
    profiler.enable(); list(nlp.pipe(texts)); profiler.disable()
    profiler.dump_stats(out)
print(json.dumps(result))
"""


def build(config_name: str, data: Path, out: Path, layers: int, width: int, steps: int) -> Path:
    """Train config_name with a random tiny BERT for steps steps on the first sentences of Resume's train split;
    RETURNS the saved pipeline's folder (reused when it exists)."""
    model_dir = out / config_name / "model"
    if (model_dir / "meta.json").exists():
        return model_dir
    import random

    import spacy
    from bench_transformer import write_random_bert
    from spacy.training import Example
    from thinc.api import fix_random_seed

    from spacy_cner.corpus.convert import iter_docs

    bert = write_random_bert(data, out / f"bert-{layers}x{width}", layers, width)
    config = spacy.util.load_config(
        ROOT / "configs" / f"{config_name}.cfg", overrides={"vars.transformer": str(bert)}, interpolate=True
    )
    fix_random_seed(0)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    gold = list(iter_docs(data / "train.char.bmes", scheme="bmes", repair=True))[:512]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 1e-3
    rng = random.Random(0)
    for _ in range(steps):
        nlp.update(rng.sample(examples, 16), sgd=optimizer)
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(model_dir)
    return model_dir


def run_child(code_dir: Path, model: Path, test: Path, mode: str, rounds: int, out: Path) -> dict:
    """Run CHILD with code_dir's spacy_cner first on the path, on one thread; RETURNS its JSON line."""
    env = {**os.environ, "PYTHONPATH": str(code_dir), "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}
    env = single_thread(env)
    code = f"STAGES = {STAGES!r}\n" + CHILD
    command = [sys.executable, "-c", code, str(model), str(test), mode, str(rounds), str(out)]
    result = subprocess.run(command, cwd=code_dir, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"{code_dir} {mode} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    found = json.loads(result.stdout.strip().splitlines()[-1])
    if not Path(found["code"]).resolve().is_relative_to(code_dir.resolve()):
        sys.exit(f"The child ran spacy_cner from {found['code']}, not from {code_dir}")
    return found


def compare(first: Path, second: Path) -> dict:
    """Whether two runs' predictions have the same entities and spans, and the largest difference of a probability."""
    a, b = (json.loads(path.read_text(encoding="utf8")) for path in (first, second))
    same, largest = True, 0.0
    for mode in ("pipe", "single"):
        for (ents_a, spans_a), (ents_b, spans_b) in zip(a[mode], b[mode]):
            same &= ents_a == ents_b and [s[:3] for s in spans_a] == [s[:3] for s in spans_b]
            if [s[:3] for s in spans_a] == [s[:3] for s in spans_b]:
                largest = max([largest] + [abs(x[3] - y[3]) for x, y in zip(spans_a, spans_b)])
    return {"same_entities_and_spans": bool(same), "max_probability_difference": largest}


def _commit(path: Path) -> str:
    """The checkout's commit (short), "+" where tracked files differ from it."""
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if head.returncode == 0 else "?"


def part_of(filename: str, name: str):
    """The part of PARTS a function's own time goes to, or None (its callers')."""
    path = filename.replace("\\", "/")
    for part, files, names in PARTS:
        if any(f in path for f in files) and (names is None or name in names):
            return part
    return None


def profile_parts(stats_path: Path) -> dict:
    """Seconds per part: each function's own time to its part, or (no part) to its callers', split as the calls
    from each caller took it, up the call graph until a caller has a part."""
    import pstats

    stats = pstats.Stats(str(stats_path)).stats  # func -> (cc, nc, tt, ct, callers {caller: (cc, nc, tt, ct)})
    totals: dict = {}

    def charge(func, seconds: float, depth: int = 0) -> None:
        part = part_of(func[0], func[2])
        callers = stats[func][4] if func in stats else {}
        if part is not None or not callers or depth > 30:
            part = part or OTHER
            totals[part] = totals.get(part, 0.0) + seconds
            return
        weights = {caller: max(timing[2], 0.0) for caller, timing in callers.items()}
        whole = sum(weights.values())
        for caller, weight in weights.items():
            share = weight / whole if whole > 0 else 1.0 / len(weights)
            charge(caller, seconds * share, depth + 1)

    for func, (_, _, own, _, _) in stats.items():
        if own > 0:
            charge(func, own)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["bert_crf", "bert_bilstm_crf"])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30, help="training steps (batches of 16) before saving")
    parser.add_argument("--code", nargs="+", default=[f"this={ROOT}"], help="NAME=DIR: checkouts to time, in order")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the versions alternating in each")
    parser.add_argument("--repeats", type=int, default=1, help="passes per mode in a child, best taken")
    parser.add_argument("--profile", action="store_true", help="a cProfile table of each version's nlp.pipe")
    add_data_argument(parser, "resume")
    add_out_argument(parser, "transformer_ceiling")
    add_result_argument(parser, "-")
    args = parser.parse_args()
    versions = dict(item.split("=", 1) for item in args.code)
    versions = {name: Path(path).resolve() for name, path in versions.items()}
    test = args.data / "test.char.bmes"
    commits = {name: _commit(path) for name, path in versions.items()}
    figures: dict = {
        "configs": {},
        "versions": {name: {"path": path, "commit": commits[name]} for name, path in versions.items()},
    }
    speed_rows, profile_rows, stage_rows = [], [], []
    for config_name in args.configs:
        model = build(config_name, args.data, args.out, args.layers, args.width, args.steps)
        found = {name: [] for name in versions}
        for _ in range(args.rounds):
            for name, code_dir in versions.items():
                out = args.out / config_name / f"predictions_{name}.json"
                found[name].append(run_child(code_dir, model, test, "time", args.repeats, out))
        first = next(iter(versions))
        config_figures = {"versions": {}}
        for name in versions:
            runs = found[name]
            pipe = max(r["pipe_chars_per_s"] for r in runs)
            single = max(r["single_chars_per_s"] for r in runs)
            wall = [max(r[f"{mode}_wall_chars_per_s"] for r in runs) for mode in ("pipe", "single")]
            agreement = compare(
                args.out / config_name / f"predictions_{first}.json",
                args.out / config_name / f"predictions_{name}.json",
            )
            config_figures["versions"][name] = {"runs": runs, "pipe": pipe, "single": single, **agreement}
            base = config_figures["versions"][first]
            speed_rows.append(
                {
                    "config": config_name,
                    "code": name,
                    "nlp.pipe chars/s": round(pipe),
                    "one text at a time chars/s": round(single),
                    "x nlp.pipe": round(pipe / base["pipe"], 2),
                    "x one at a time": round(single / base["single"], 2),
                    "wall clock chars/s (nlp.pipe / one at a time)": [round(value) for value in wall],
                    f"same entities as {first}": agreement["same_entities_and_spans"],
                    "largest probability difference": float(f"{agreement['max_probability_difference']:.1e}"),
                }
            )
        if args.profile:
            n_chars = found[first][0]["n_chars"]
            parts_by_version, stages_by_version = {}, {}
            for name, code_dir in versions.items():
                stats_path = args.out / config_name / f"profile_{name}.prof"
                run_child(code_dir, model, test, "profile", 1, stats_path)
                parts_by_version[name] = profile_parts(stats_path)
                stages_by_version[name] = run_child(code_dir, model, test, "stages", 1, stats_path)["stages"]
            config_figures["profile_seconds"] = parts_by_version
            config_figures["stage_seconds"] = stages_by_version
            labels = [label for _, _, label in STAGES[:2]] + ["    encoder (the Hugging Face model's forward)"]
            labels += [label for _, _, label in STAGES[2:]] + ["Doc building (the tokenizer)", "total (nlp.pipe)"]
            for label in labels:
                if any(label in stages for stages in stages_by_version.values()):
                    row = {"config": config_name, "stage (timed, callees included)": label.strip()}
                    for name, stages in stages_by_version.items():
                        value = stages.get(label)
                        row[f"{name} us/char"] = None if value is None else round(1e6 * value / n_chars, 2)
                    stage_rows.append(row)
            for part in [p for p, _, _ in PARTS if p] + [OTHER]:
                row = {"config": config_name, "part": part}
                for name, parts in parts_by_version.items():
                    row[f"{name} us/char"] = round(1e6 * parts.get(part, 0.0) / n_chars, 2)
                profile_rows.append(row)
            total = {"config": config_name, "part": "total (under cProfile)"}
            for name, parts in parts_by_version.items():
                total[f"{name} us/char"] = round(1e6 * sum(parts.values()) / n_chars, 2)
            profile_rows.append(total)
        figures["configs"][config_name] = config_figures
    notes = (
        f"A random {args.layers}-layer BERT of width {args.width} (the corpus's characters as its vocabulary), "
        f"trained {args.steps} steps; Resume's test split ({found[first][0]['n_texts']} texts, "
        f"{found[first][0]['n_chars']:,} characters), one thread, best of {args.rounds} rounds with the code "
        f"versions alternating ({', '.join(f'{n}: {p} at {commits[n]}' for n, p in versions.items())}). nlp.pipe at "
        f"the config's batch size ({found[first][0]['batch_size']}); one at a time: nlp(text) per text. chars/s and "
        "us/char in the process's CPU time."
    )
    tables = [speed_rows] + ([stage_rows, profile_rows] if profile_rows else [])
    publish(args.result, figures, Section("The transformer path's ceiling: a tiny encoder, one thread", notes, tables))


if __name__ == "__main__":
    main()
