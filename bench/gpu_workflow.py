"""What bench/gpu_workflow.sh needs of Python: a random encoder, the GPU speed pass, the result file.

Usage: python bench/gpu_workflow.py encoder --data DIR --out DIR [--kind bert] [--layers 12] [--width 768]
       python bench/gpu_workflow.py speed MODEL TEST.spacy --gpu-id 0 --output speed.json
       python bench/gpu_workflow.py record WORK OUT_JSON

`record` runs after every step of the script and rewrites OUT_JSON (the shape of bench/results/*.json:
command, date, machine with the GPU that nvidia-smi names, code version, figures, the rows of its tables) from what
the steps left in WORK: steps.tsv (one line a step: name, status, exit code, seconds, note), the
settings in settings.json, the evaluate metrics, speed.json and gpu.txt. A step that failed or ran
out of time is a row with its status; the figures it would have given are left out.
"""

import argparse
import datetime
import json
import os
import time
from pathlib import Path

from _common import _json_safe, code_version, machine

# The test scores' columns: (column, key of spaCy's scores).
TEST_COLUMNS = (("test P", "ents_p"), ("test R", "ents_r"), ("test F1", "ents_f"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    encoder = commands.add_parser("encoder", help="write a randomly initialised BERT or NEZHA (no hub)")
    encoder.add_argument("--data", type=Path, required=True, help="Resume's folder: the vocabulary's characters")
    encoder.add_argument("--out", type=Path, required=True)
    encoder.add_argument("--kind", choices=["bert", "nezha"], default="bert")
    encoder.add_argument("--layers", type=int, default=12)
    encoder.add_argument("--width", type=int, default=768)
    speed = commands.add_parser("speed", help="chars/s of a pipeline over a .spacy file's texts")
    speed.add_argument("model", type=Path)
    speed.add_argument("corpus", type=Path)
    speed.add_argument("--gpu-id", type=int, default=-1)
    speed.add_argument("--repeats", type=int, default=3)
    speed.add_argument("--output", type=Path, required=True)
    record = commands.add_parser("record", help="write the result file from the steps so far")
    record.add_argument("work", type=Path)
    record.add_argument("output", type=Path)
    args = parser.parse_args()
    if args.command == "encoder":
        write_encoder(args.kind, args.data, args.out, args.layers, args.width)
    elif args.command == "speed":
        args.output.write_text(json.dumps(measure_speed(args.model, args.corpus, args.gpu_id, args.repeats)) + "\n")
    else:
        write_record(args.work, args.output)


def write_encoder(kind: str, data: Path, out: Path, layers: int, width: int) -> Path:
    """A randomly initialised encoder whose vocabulary is the corpus's characters (as bench_gpu's)."""
    from bench_gpu import write_random_nezha
    from bench_transformer import write_random_bert

    write = write_random_bert if kind == "bert" else write_random_nezha
    path = write(data, out, layers, width)
    print(f"Wrote a random {layers}-layer width-{width} {kind} to {path}")
    return path


def measure_speed(model: Path, corpus: Path, gpu_id: int, repeats: int) -> dict:
    """The fastest of `repeats` passes of nlp.pipe(batch_size=64) over the corpus's texts, after a
    warm-up batch (as bench_gpu's GPU chars/s)."""
    import spacy
    from spacy.tokens import DocBin

    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = spacy.load(model)
    texts = [doc.text for doc in DocBin().from_disk(corpus).get_docs(nlp.vocab)]
    for _ in nlp.pipe(texts[:32], batch_size=64):
        pass
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=64):
            pass
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    chars = sum(len(text) for text in texts)
    result = {"chars_per_s": chars / best, "chars": chars, "docs": len(texts), "seconds": best, "gpu_id": gpu_id}
    print(json.dumps(result))
    return result


def read_steps(work: Path) -> list:
    """steps.tsv's rows: name, status (ok, failed, timeout, skipped), exit code, seconds, note."""
    path = work / "steps.tsv"
    rows = []
    for line in path.read_text(encoding="utf8").splitlines() if path.exists() else []:
        name, status, code, seconds, note = (line.split("\t") + [""] * 5)[:5]
        rows.append(
            {"step": name, "status": status, "rc": int(code or 0), "seconds": float(seconds or 0), "note": note}
        )
    return rows


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None


def write_record(work: Path, output: Path) -> Path:
    """The result file of the run so far (see the module's docstring)."""
    settings = _read_json(work / "settings.json") or {}
    steps = read_steps(work)
    by_name = {row["step"]: row for row in steps}
    metrics = _read_json(work / "metrics.json")
    speed = _read_json(work / "speed.json")
    student = _read_json(work / "student_metrics.json")
    gpu = (work / "gpu.txt").read_text(encoding="utf8").strip() if (work / "gpu.txt").exists() else "no GPU"
    figures = {"settings": settings, "steps": steps}
    train = by_name.get("train-transformer")
    if train and train["status"] == "ok":
        figures["train_seconds"] = train["seconds"]
        figures["train_steps_per_s"] = settings.get("steps", 0) / max(train["seconds"], 1e-9)
    if metrics:
        figures["test"] = {key: metrics.get(key) for key in ("ents_p", "ents_r", "ents_f", "speed")}
    if speed:
        figures["chars_per_s"] = speed["chars_per_s"]
    if student:
        figures["student_test"] = {key: student.get(key) for key in ("ents_p", "ents_r", "ents_f", "speed")}
    figures["wall_seconds"] = sum(row["seconds"] for row in steps)
    device = "GPU" if settings.get("gpu_id", -1) >= 0 else "CPU"
    notes = (
        f"GPU: {gpu}. `spacy project run` fetch-assets, convert, train-transformer ({settings.get('config')}.cfg on a "
        f"random {settings.get('layers')}-layer, width-{settings.get('width')} {settings.get('kind')}, no pretrained "
        f"weights; {settings.get('steps')} steps, warm-up {settings.get('warmup')}, dev evaluated every "
        f"{settings.get('eval_frequency')}), evaluate, package, then distill (the student: configs/student.cfg, "
        f"{settings.get('distill_steps')} steps; its seconds include the teacher's pass), on Resume; chars/s: "
        f"the fastest of 3 passes of nlp.pipe over the test texts on the {device}; each step time-boxed "
        f"(status timeout), the whole under {settings.get('budget')} s. Empty cells: not measured. Steps: "
        + ", ".join(f"{row['step']} {row['status']} ({row['seconds']:.1f} s)" for row in steps)
        + "."
    )
    step_rows = [
        {"step": row["step"], "status": row["status"], "seconds": round(row["seconds"], 1), "note": row["note"]}
        for row in steps
    ]
    systems = []

    def percent(found, key):
        return round(100 * found[key], 2) if found and found.get(key) is not None else None

    if metrics or train:
        systems.append(
            {
                "system": str(settings.get("config")),
                "steps": settings.get("steps"),
                "training seconds": round(train["seconds"], 1) if train else None,
                "training status": train["status"] if train else None,
                **{column: percent(metrics, key) for column, key in TEST_COLUMNS},
                "chars/s": round(speed["chars_per_s"]) if speed else None,
            }
        )
    distill = by_name.get("distill")
    if distill and distill["status"] != "skipped":
        systems.append(
            {
                "system": f"student ({settings.get('config')} distilled)",
                "steps": settings.get("distill_steps"),
                "training seconds": round(distill["seconds"], 1),
                "training status": distill["status"],
                **{column: percent(student, key) for column, key in TEST_COLUMNS},
                "chars/s": None,
            }
        )
    record = {
        "name": output.stem,
        "title": f"The transformer workflow of project.yml on a {device} (gpu_id {settings.get('gpu_id')})",
        "command": settings.get("command", "bash bench/gpu_workflow.sh"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "gpu": gpu},
        "code_version": settings.get("code_version") or code_version(),
        "figures": _json_safe(figures),
        # The systems first: BENCHMARKS.md shows each result's first table (the steps are in the notes too).
        "table_rows": [systems, step_rows],
        "notes": notes,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    # Written beside, then renamed: the GPU tests' step records in the background while others run.
    part = output.with_name(f"{output.name}.{os.getpid()}.part")
    part.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    part.replace(output)
    return output


if __name__ == "__main__":
    main()
