"""bench/gpu_workflow.sh, the GPU issue's one device call: its shell syntax, the project.yml commands
it runs, and the result file its helper writes (the run itself: tests/integration/test_gpu_workflow.py)."""

import json
import shlex
import subprocess
import sys

import pytest
from spacy.util import load_config

from conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"
TRANSFORMER_CONFIGS = [
    "bert_crf",
    "bert_bilstm_crf",
    "lebert",
    "nezha_bilstm_crf",
    "nezha_bilstm_crf_df",
    "nezha_bilstm_crf_df_at",
]


@pytest.mark.parametrize("script", ["gpu_workflow.sh", "gpu_session.sh"])
def test_script_parses(script):
    result = subprocess.run(["bash", "-n", str(BENCH / script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_session_runs_parse_as_bench_slow_start_arguments():
    """gpu_session.sh's slow-start runs name systems and settings bench_slow_start.py accepts (a typo would cost
    a run on the device)."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_slow_start
    finally:
        sys.path.remove(str(BENCH))
    text = (BENCH / "gpu_session.sh").read_text(encoding="utf8")
    runs = text.split("RUNS=(", 1)[1].split("\n)", 1)[0].strip().splitlines()
    assert len(runs) >= 6
    for line in runs:
        name, arguments = shlex.split(line)[0].split("|", 1)
        args = shlex.split(arguments)
        systems = args[args.index("--systems") + 1 :]
        systems = systems[: next((i for i, arg in enumerate(systems) if arg.startswith("--")), len(systems))]
        assert systems and set(systems) <= set(bench_slow_start.SYSTEMS), (name, systems)
        for index, arg in enumerate(args):
            if arg == "--variant":
                variant_name, _, settings = args[index + 1].partition(":")
                assert variant_name and "=" in settings and settings.startswith("components."), line
            elif arg == "--learn-rate":
                assert float(args[index + 1]) > 0


def transformer_commands(overrides=None) -> dict:
    from weasel.util.config import load_project_config  # what `spacy project run` reads

    project = load_project_config(REPO_ROOT, overrides=overrides or {})
    commands = {command["name"]: command for command in project["commands"]}
    return {name: commands[name] for name in project["workflows"]["transformer"]}


def test_transformer_workflow_runs_train_evaluate_package():
    assert list(transformer_commands()) == ["fetch-assets", "convert", "train-transformer", "evaluate", "package"]


@pytest.mark.parametrize("config", TRANSFORMER_CONFIGS)
def test_train_transformer_overrides_settings_each_config_has(config):
    """The vars the script passes land in train-transformer's `spacy train`, and every setting that
    command overrides is one the config has (confection would add a missing one silently); the lexicon
    path too where the config reads one (the `train` command passes it to every config alike)."""
    overrides = {
        "vars.config": config,
        "vars.gpu_id": 0,
        "vars.transformer": "/tmp/encoder",
        "vars.transformer_max_steps": 200,
        "vars.transformer_warmup_steps": 10,
        "vars.transformer_eval_frequency": 100,
        "vars.mixed_precision": "true",
    }
    (script,) = transformer_commands(overrides)["train-transformer"]["script"]
    words = shlex.split(script)
    assert words[:4] == ["python", "-m", "spacy", "train"] and words[4] == f"configs/{config}.cfg"
    options = dict(zip(words[5::2], words[6::2]))
    assert options["--gpu-id"] == "0" and options["--vars.transformer"] == "/tmp/encoder"
    assert options["--training.max_steps"] == "200" and options["--training.eval_frequency"] == "100"
    assert options["--training.optimizer.learn_rate.warmup_steps"] == "10"
    assert options["--vars.mixed_precision"] == "true"
    cfg = load_config(REPO_ROOT / "configs" / f"{config}.cfg")
    for option in options:
        if option in ("--output", "--gpu-id") or (option == "--paths.lexicon" and "lexicon" not in cfg["paths"]):
            continue
        section = cfg
        for part in option[2:].split("."):
            assert part in section, f"{config}.cfg has no {option[2:]}"
            section = section[part]
    # total_steps follows max_steps: the learning rate decays to 0 where training stops.
    assert cfg["training"]["optimizer"]["learn_rate"]["total_steps"] == "${training.max_steps}"


def test_record_writes_the_steps_so_far(tmp_path):
    """`record` turns the steps written so far into bench/results' shape; a step that timed out is a row
    with its status, and the figures it did not give are left out."""
    work = tmp_path / "work"
    work.mkdir()
    settings = {
        "command": "GPU_ID=0 bash bench/gpu_workflow.sh",
        "gpu_id": 0,
        "config": "bert_crf",
        "kind": "bert",
        "layers": 12,
        "width": 768,
        "steps": 200,
        "warmup": 10,
        "eval_frequency": 100,
        "budget": 540,
        "code_version": {"commit": "abc", "dirty": None},
    }
    (work / "settings.json").write_text(json.dumps(settings))
    (work / "gpu.txt").write_text("NVIDIA H100 80GB HBM3 (81559 MiB, driver 580.159.04)\n")
    (work / "steps.tsv").write_text(
        "pytest-gpu\tok\t0\t55.2\t\ntrain-transformer\ttimeout\t124\t300.0\tstopped after 300 s\n"
    )
    output = tmp_path / "out" / "gpu_workflow.json"
    args = [sys.executable, str(BENCH / "gpu_workflow.py"), "record", str(work), str(output)]
    subprocess.run(args, check=True, cwd=REPO_ROOT)
    record = json.loads(output.read_text())
    assert record["name"] == "gpu_workflow" and record["code_version"]["commit"] == "abc"
    assert record["machine"]["gpu"].startswith("NVIDIA H100") and record["machine"]["cpu"]
    assert [(row["step"], row["status"]) for row in record["table_rows"][1]] == [
        ("pytest-gpu", "ok"),
        ("train-transformer", "timeout"),
    ]
    assert "pytest-gpu ok (55.2 s), train-transformer timeout (300.0 s)." in record["notes"]
    assert record["table_rows"][0] == [
        {
            "system": "bert_crf",
            "steps": 200,
            "training seconds": 300.0,
            "training status": "timeout",
            "test P": None,
            "test R": None,
            "test F1": None,
            "chars/s": None,
        }
    ]
    assert "tables" not in record
    assert "test" not in record["figures"] and "train_seconds" not in record["figures"]
    # Then evaluate and the speed pass finish: their figures join the record.
    (work / "metrics.json").write_text(json.dumps({"ents_p": 0.8, "ents_r": 0.78, "ents_f": 0.79, "speed": 20000.0}))
    (work / "speed.json").write_text(json.dumps({"chars_per_s": 23456.7}))
    subprocess.run(args, check=True, cwd=REPO_ROOT)
    record = json.loads(output.read_text())
    assert [record["table_rows"][0][0][key] for key in ("test P", "test R", "test F1", "chars/s")] == [
        80.0,
        78.0,
        79.0,
        23457,
    ]
    assert record["figures"]["chars_per_s"] == pytest.approx(23456.7)
