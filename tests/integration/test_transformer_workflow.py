"""project.yml's transformer workflow as bench/gpu_workflow.sh runs it on the GPU, here on the CPU with
a tiny BERT: train-transformer -> evaluate -> package on the toy corpus, and the whole script's dry run
on Resume, distillation included (slow)."""

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import srsly

from conftest import REPO_ROOT, SHARED_DATA, TRAIN_DATA, write_docs


def run(command, project, *args):
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", command, str(project), *args],
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_transformer_workflow_trains_evaluates_and_packages(tmp_path, tiny_bert):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO_ROOT / "project.yml", project)
    shutil.copytree(REPO_ROOT / "configs", project / "configs")
    corpus = project / "corpus" / "resume"
    corpus.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        write_docs(corpus / f"{split}.spacy", TRAIN_DATA[:3])
    variables = [
        "--vars.config",
        "bert_crf",
        "--vars.transformer",
        str(tiny_bert),
        "--vars.transformer_max_steps",
        "3",
        "--vars.transformer_warmup_steps",
        "1",
        "--vars.transformer_eval_frequency",
        "1",
    ]
    output = run("train-transformer", project, *variables)
    assert "--training.max_steps 3" in output and "--gpu-id -1" in output
    meta = srsly.read_json(project / "training" / "resume" / "bert_crf" / "model-best" / "meta.json")
    assert meta["pipeline"] == ["crf_ner"]
    run("evaluate", project, *variables)
    assert "ents_f" in srsly.read_json(project / "metrics" / "resume_bert_crf.json")
    run("package", project, *variables)
    (sdist,) = (project / "packages").glob("zh_cner_resume-*/dist/*.tar.gz")
    with tarfile.open(sdist) as archive:
        assert any(name.endswith("crf_ner/model") for name in archive.getnames())


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "resume").exists(), reason=f"no Resume at {SHARED_DATA}")
def test_gpu_workflow_dry_run_on_the_cpu(tmp_path):
    """GPU_ID=-1 TINY=1 bash bench/gpu_workflow.sh: every step runs (the GPU tests skip), the distillation
    route too, exit 0, and the result file names each step with its status (about 4 minutes on 2 cores)."""
    out = tmp_path / "out"
    env = {
        **os.environ,
        "GPU_ID": "-1",
        "TINY": "1",
        "OUT": str(out),
        "WORK": str(tmp_path / "work"),
        "DATA": str(SHARED_DATA / "resume"),
        "OMP_NUM_THREADS": "1",
    }
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "bench" / "gpu_workflow.sh")], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads((out / "gpu_workflow.json").read_text(encoding="utf8"))
    status = {row[0]: row[1] for row in record["tables"][0]["rows"]}
    assert set(status.values()) == {"ok"}, status
    assert list(status)[:7] == [
        "pytest-gpu",
        "encoder",
        "fetch-assets",
        "convert",
        "train-transformer",
        "evaluate",
        "speed",
    ]
    assert list(status)[7:] == ["package", "distill", "distill-evaluate"]
    assert record["figures"]["chars_per_s"] > 0 and "ents_f" in record["figures"]["test"]
    assert "ents_f" in record["figures"]["student_test"]
    # The device brings back 8 files at most.
    assert {path.name for path in out.iterdir()} == {
        "gpu_workflow.json",
        "workflow.log",
        "pytest_gpu.log",
        "train.log",
        "metrics.json",
        "package_listing.txt",
        "distill.log",
        "distill_metrics.json",
    }
