"""`spacy project run` trains and evaluates the TENER, a transformer, the lexicon and the
self-trained vectors configs end to end (toy corpus); project.yml's vars and assets."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.util import load_config

from conftest import REPO_ROOT, SHARED_DATA, SMALL_CONFIG_OVERRIDES, TRAIN_DATA, write_docs


def project_copy(tmp_path: Path, config: str, overrides: dict) -> Path:
    """The project with a toy corpus and configs/small.cfg: `config` with `overrides`."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO_ROOT / "project.yml", project)
    shutil.copytree(REPO_ROOT / "configs", project / "configs")
    load_config(REPO_ROOT / "configs" / f"{config}.cfg", overrides=overrides).to_disk(project / "configs" / "small.cfg")
    corpus = project / "corpus" / "resume"
    corpus.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        write_docs(corpus / f"{split}.spacy", TRAIN_DATA[:3])
    return project


@pytest.mark.parametrize("config", ["tener", "bert_crf", "lexicon", "lebert"])
def test_project_trains_and_evaluates(config, tmp_path, tiny_bert):
    overrides = SMALL_CONFIG_OVERRIDES.get(config, {"vars.transformer": str(tiny_bert)})
    project = project_copy(tmp_path, config, overrides)
    for command in ("train-demo", "evaluate-demo"):
        args = [
            sys.executable,
            "-m",
            "spacy",
            "project",
            "run",
            command,
            str(project),
            "--vars.config",
            "small",
            "--vars.demo_max_steps",
            "4",
        ]
        result = subprocess.run(args, capture_output=True, text=True, cwd=project)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    metrics = srsly.read_json(project / "metrics" / "resume_demo.json")
    assert "ents_f" in metrics
    if config == "tener":  # the annotate command, once: the test split as JSONL, gold labels carried through
        args = [
            sys.executable,
            "-m",
            "spacy",
            "project",
            "run",
            "annotate",
            str(project),
            "--vars.config",
            "small",
            "--vars.annotate_model",
            "training/resume/demo/model-best",
        ]
        result = subprocess.run(args, capture_output=True, text=True, cwd=project)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        rows = list(srsly.read_jsonl(project / "annotations" / "resume_small" / "test.00000.jsonl"))
        test_docs = list(
            DocBin().from_disk(project / "corpus" / "resume" / "test.spacy").get_docs(spacy.blank("zh").vocab)
        )
        assert [row["text"] for row in rows] == [doc.text for doc in test_docs]
        assert all("label" in row and isinstance(row["entities"], list) for row in rows)
    nlp = spacy.load(project / "training" / "resume" / "demo" / "model-best")
    model = nlp.get_pipe("crf_ner").model
    encoder = model.get_ref("encoder" if config == "tener" else "tok2vec")
    assert encoder.name == {"tener": "tener", "lexicon": "char_bigram_lexicon"}.get(config, "transformer_tok2vec")
    if config in ("lexicon", "lebert"):
        # The project's default lexicon: jieba's dictionary, saved with the pipeline.
        assert len(encoder.get_ref("lexicon_adapter").attrs["lexicon"].lexicon) > 300_000


def test_project_trains_the_default_on_its_own_vectors(tmp_path):
    """train-vectors, then train-demo with configs/default.cfg and --vars.vectors: those vectors, not LAC's (nothing
    fetched: the tests may not download, conftest); configs/pretrain_free.cfg without --vars.vectors trains the same
    ones itself at initialize."""
    project = project_copy(tmp_path, "default", SMALL_CONFIG_OVERRIDES["pretrain_free"])  # widths only
    load_config(REPO_ROOT / "configs" / "pretrain_free.cfg", overrides=SMALL_CONFIG_OVERRIDES["pretrain_free"]).to_disk(
        project / "configs" / "free.cfg"
    )
    train = project / "corpus" / "resume" / "train.spacy"
    docs = list(DocBin().from_disk(train).get_docs(spacy.blank("zh").vocab))
    DocBin(docs=docs * 2).to_disk(train)  # every bigram twice: min count 2
    commands = [
        ("train-vectors",),
        ("train-demo", "--vars.config", "small", "--vars.vectors", "vectors/resume", "--vars.demo_max_steps", "4"),
    ]
    for command in commands:
        args = [sys.executable, "-m", "spacy", "project", "run", *command[:1], str(project), *command[1:]]
        result = subprocess.run(args, capture_output=True, text=True, cwd=project)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "([initialize] vectors), not LAC's" in " ".join((result.stdout + result.stderr).split())
    nlp = spacy.load(project / "training" / "resume" / "demo" / "model-best")
    assert nlp.vocab.vectors.find(key="张三") >= 0  # the vectors travel with the pipeline
    assert any(node.name == "char_bigram_vectors" for node in nlp.get_pipe("crf_ner").model.walk())
    assert not any("LAC" in source["name"] for source in nlp.meta.get("sources") or [])
    # Without --vars.vectors pretrain_free.cfg trains them itself, at initialize: the same ones (seed 0).
    args = [
        sys.executable,
        "-m",
        "spacy",
        "project",
        "run",
        "train-demo",
        str(project),
        "--vars.config",
        "free",
        "--vars.demo_max_steps",
        "4",
    ]
    result = subprocess.run(args, capture_output=True, text=True, cwd=project)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Vectors trained on the train corpus's" in result.stdout + result.stderr
    again = spacy.load(project / "training" / "resume" / "demo" / "model-best")
    key = again.vocab.strings["张三"]
    numpy.testing.assert_array_equal(again.vocab.vectors[key], nlp.vocab.vectors[key])


def test_max_steps_var_is_part_of_the_train_command():
    """spaCy re-runs a command whose script (vars filled in) differs from the lock file's."""
    from weasel.util.config import load_project_config  # what `spacy project` runs on

    def train_script(overrides):
        project = load_project_config(REPO_ROOT, overrides=overrides)
        (train,) = [c for c in project["commands"] if c["name"] == "train"]
        return train["script"]

    default, capped = train_script({}), train_script({"vars.max_steps": 2000})
    assert "--training.max_steps 0" in default[0]
    assert "--training.max_steps 2000" in capped[0]
    assert default != capped


@pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"no local copy of the datasets at {SHARED_DATA}")
def test_asset_checksums_match_the_local_copies():
    """fetch-assets copies from vars.local_data and verifies the md5 in project.yml: each asset
    with a local copy must match it (a wrong checksum stops the offline workflow)."""
    import hashlib

    assets = [a for a in srsly.read_yaml(REPO_ROOT / "project.yml")["assets"] if a.get("checksum")]
    checked = 0
    for asset in assets:
        local = SHARED_DATA / Path(asset["dest"]).relative_to("assets")
        if local.exists():
            assert hashlib.md5(local.read_bytes()).hexdigest() == asset["checksum"], asset["dest"]
            checked += 1
    if not checked:
        pytest.skip(f"none of project.yml's assets is in {SHARED_DATA}")
    assert any("msra" in a["dest"] for a in assets)


def test_project_package_writes_the_model_card_into_a_copy(tmp_path):
    """`package` puts the model card (labels, the dev split's speed, the source) in the package's README
    and leaves train's output as it was, so that a rerun of the workflow finds train up to date."""
    project = project_copy(tmp_path, "tener", SMALL_CONFIG_OVERRIDES["tener"])
    args = [
        sys.executable,
        "-m",
        "spacy",
        "project",
        "run",
        "train-demo",
        str(project),
        "--vars.config",
        "small",
        "--vars.demo_max_steps",
        "2",
    ]
    result = subprocess.run(args, capture_output=True, text=True, cwd=project)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    model_best = project / "training" / "resume" / "default" / "model-best"
    shutil.copytree(project / "training" / "resume" / "demo" / "model-best", model_best)
    before = {path.relative_to(model_best): path.read_bytes() for path in model_best.rglob("*") if path.is_file()}
    args = [sys.executable, "-m", "spacy", "project", "run", "package", str(project)]
    result = subprocess.run(args, capture_output=True, text=True, cwd=project)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    after = {path.relative_to(model_best): path.read_bytes() for path in model_best.rglob("*") if path.is_file()}
    assert after == before
    readme = (project / "packages" / "zh_cner_resume-0.1.0" / "README.md").read_text(encoding="utf8")
    assert "### Entity labels" in readme and "characters a second" in readme
    assert "Resume NER (Zhang and Yang 2018)" in readme


def test_project_distill_refuses_the_test_splits_texts():
    """distill refuses unlabeled texts found in --dev or --test (check_unlabeled_texts): the project's
    command gives it the test split too, and depends on it."""
    command = next(c for c in srsly.read_yaml(REPO_ROOT / "project.yml")["commands"] if c["name"] == "distill")
    assert "--test corpus/${vars.dataset}/test.spacy" in command["script"][0]
    assert "corpus/${vars.dataset}/test.spacy" in command["deps"]
