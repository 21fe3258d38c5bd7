"""The crf_ner pipe: the checks spaCy runs on its own pipes, plus CRF specifics.

Every model here is tiny (32 wide) and trained for a few dozen steps on five
sentences, so the whole file takes about a minute of CPU time, one fresh Python
(the checks "without importing spacy_cner") included; `spacy train` on configs/default.cfg
is in tests/integration/test_spacy_train.py.
"""
import json
import os
import random
import signal
import subprocess
import sys
import warnings
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Dict, List, Tuple

import numpy
import pytest
import spacy
import srsly
import torch
from numpy.testing import assert_allclose
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry
from thinc.api import fix_random_seed

from conftest import TRAIN_DATA, make_examples
from reference import all_paths, log_sum_paths
from spacy_cner.layers._torch import torch_module
from spacy_cner.pipeline import crf_ner as crf_ner_module
from spacy_cner.pipeline import decoding
from spacy_cner.training.augment import join_pairs
from spacy_cner.pipeline.crf_ner import make_crf_ner
from spacy_cner.tags import SCHEMES, is_valid_sequence, most_probable_spans, preset_constraints
from spacy_cner.long_docs import doc_windows

SMALL_MODEL = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {
        "@architectures": "spacy-cner.CharBigramEmbed.v1",
        "width": 32,
        "char_rows": 500,
        "bigram_rows": 1000, "bigram_dropout": 0.0,
    },
    # Explicit dropout: add_pipe merges unset keys from the factory default (0.5).
    "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0},
}
LABELS = ("LOC", "ORG", "PER")  # the toy corpus's
# Texts to compare predictions on: training sentences, new ones, empty and
# whitespace-only docs, and whitespace inside a text.
TEXTS = [
    "我在北京市工作",
    "",
    "张三去了上海",
    "   ",
    "李四是阿里巴巴的员工",
    "\n",
    "王五在深圳工作",
    "腾讯 和  阿里巴巴\n张三",
]
N_TRAIN_STEPS = 40


def make_nlp(scheme: str = "BIOES") -> spacy.Language:
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config=pipe_config(scheme))
    return nlp


def pipe_config(scheme: str) -> Dict:
    return {"model": SMALL_MODEL, "scheme": scheme}


def train(nlp: spacy.Language, examples: List[Example], n_steps: int = N_TRAIN_STEPS) -> List[float]:
    """Initialize from the examples and update on all of them n_steps times; the losses."""
    optimizer = nlp.initialize(get_examples=lambda: examples)
    history = []
    for _ in range(n_steps):
        losses: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        history.append(losses["crf_ner"])
    return history


@lru_cache(maxsize=None)
def trained_bytes(scheme: str) -> Tuple[bytes, Tuple[float, ...]]:
    """A pipeline overfit to TRAIN_DATA (built once per scheme) and its training losses."""
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    losses = train(nlp, make_examples(nlp))
    return nlp.to_bytes(), tuple(losses)


def load_trained(scheme: str = "BIOES") -> spacy.Language:
    """A fresh copy of the trained pipeline, safe to modify."""
    nlp = make_nlp(scheme)
    return nlp.from_bytes(trained_bytes(scheme)[0])


def predictions(docs) -> List[Dict]:
    """Everything crf_ner sets, in a comparable form (scores to 5 decimals)."""
    return [
        {
            "ents": [(ent.start, ent.end, ent.label_) for ent in doc.ents],
            "iob": [token.ent_iob_ for token in doc],
            "types": [token.ent_type_ for token in doc],
            "spans": [
                (span.start, span.end, span.label_, round(float(score), 5))
                for span, score in zip(doc.spans.get("crf_ner", []), doc.spans["crf_ner"].attrs["scores"] if "crf_ner" in doc.spans else [])
            ],
        }
        for doc in docs
    ]


def run_python(script: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    """Run a script in a fresh interpreter; on timeout kill its whole process group."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    finally:
        # Workers a hung multiprocessing pipe left behind share the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


# ---------------------------------------------------------------------------
# Labels and initialization


def test_no_label_raises():
    nlp = make_nlp()
    examples = make_examples(nlp, [("我在北京市工作", []), ("张三去了上海", [])])
    with pytest.raises(ValueError, match="no labels"):
        nlp.initialize(get_examples=lambda: examples)
    with pytest.raises(ValueError, match="no labels"):
        make_nlp().initialize()


@pytest.mark.parametrize("scheme,n_tags", [("BIOES", 1 + 4 * 3), ("BIO", 1 + 2 * 3)])
def test_labels_from_examples(scheme, n_tags):
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    ner = nlp.get_pipe("crf_ner")
    nlp.initialize(get_examples=lambda: make_examples(nlp))
    assert ner.labels == LABELS
    assert ner.label_data == LABELS
    assert len(ner.tag_names) == n_tags
    assert ner.model.get_dim("nO") == n_tags


def test_labels_from_initialize_config():
    fix_random_seed(0)
    nlp = make_nlp()
    nlp.config["initialize"]["components"]["crf_ner"] = {"labels": ["PER", "LOC"]}
    nlp.initialize()
    ner = nlp.get_pipe("crf_ner")
    # The given labels win, in the given order.
    assert ner.labels == ("PER", "LOC")
    assert ner.model.get_dim("nO") == 1 + 4 * 2


def test_labels_argument_overrides_examples():
    fix_random_seed(0)
    nlp = make_nlp()
    ner = nlp.get_pipe("crf_ner")
    examples = make_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, labels=["LOC"])
    assert ner.labels == ("LOC",)
    # Gold entities of labels the pipe does not predict are no error in training, but a warning.
    with pytest.warns(UserWarning, match=r"ORG \(2\), PER \(3\)"):
        losses = nlp.update(examples, sgd=nlp.create_optimizer())
    assert numpy.isfinite(losses["crf_ner"])


def test_labels_from_init_labels_file(tmp_path):
    """`spacy init labels` writes label_data as JSON; read_labels.v1 feeds it back."""
    fix_random_seed(0)
    nlp = make_nlp()
    nlp.initialize(get_examples=lambda: make_examples(nlp))
    label_path = tmp_path / "crf_ner.json"
    srsly.write_json(label_path, nlp.get_pipe("crf_ner").label_data)

    nlp2 = make_nlp()
    nlp2.config["initialize"]["components"]["crf_ner"] = {
        "labels": {"@readers": "spacy.read_labels.v1", "path": str(label_path)}
    }
    nlp2.initialize()
    assert nlp2.get_pipe("crf_ner").labels == LABELS


def test_add_label():
    nlp = make_nlp()
    ner = nlp.get_pipe("crf_ner")
    assert ner.add_label("LOC") == 1
    assert ner.add_label("LOC") == 0
    for bad in (9, "", "  "):
        with pytest.raises(ValueError):
            ner.add_label(bad)
    fix_random_seed(0)
    nlp.initialize()
    assert ner.labels == ("LOC",)
    # After initialization the model grows (test_add_label_after_training_keeps_the_learned_weights).
    assert ner.add_label("PER") == 1
    assert ner.labels == ("LOC", "PER")
    assert ner.model.get_dim("nO") == len(ner.tag_names) == 9
    assert ner.add_label("LOC") == 0


def test_unknown_scheme_raises():
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="scheme"):
        nlp.add_pipe("crf_ner", config={"model": SMALL_MODEL, "scheme": "IOB2"})
    assert nlp.add_pipe("crf_ner", config=pipe_config("bio")).cfg["scheme"] == "BIO"


def test_initialize_checks_get_examples():
    nlp = make_nlp()
    examples = make_examples(nlp)
    with pytest.raises(TypeError):
        nlp.initialize(get_examples=lambda: None)
    with pytest.raises(TypeError):
        nlp.initialize(get_examples=lambda: [])
    with pytest.raises(TypeError):
        nlp.initialize(get_examples=examples)


# ---------------------------------------------------------------------------
# Training and evaluation


@pytest.mark.parametrize("scheme", SCHEMES)
def test_overfitting(scheme):
    nlp = load_trained(scheme)
    losses = trained_bytes(scheme)[1]
    assert losses[-1] < losses[0] / 5
    scores = nlp.evaluate(make_examples(nlp))
    assert scores["ents_f"] == 1.0
    assert scores["ents_p"] == 1.0
    assert scores["ents_r"] == 1.0
    assert set(scores["ents_per_type"]) == set(LABELS)
    assert all(type_scores["f"] == 1.0 for type_scores in scores["ents_per_type"].values())
    doc = nlp("我在北京市工作")
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("北京市", "LOC")]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_annotations_are_consistent(scheme):
    nlp = load_trained(scheme)
    for doc in nlp.pipe(TEXTS):
        iobs = [token.ent_iob_ for token in doc]
        types = [token.ent_type_ for token in doc]
        # crf_ner leaves no token unannotated.
        assert set(iobs) <= {"B", "I", "O"}
        for iob, ent_type, token in zip(iobs, types, doc):
            assert (iob == "O") == (ent_type == "")
            assert not (token.is_space and iob != "O")
        assert not iobs or iobs[0] != "I"
        ents_from_tokens = []
        for i, (iob, ent_type) in enumerate(zip(iobs, types)):
            if iob == "B":
                ents_from_tokens.append([i, i + 1, ent_type])
            elif iob == "I":
                assert ents_from_tokens and ents_from_tokens[-1][1] == i
                assert ents_from_tokens[-1][2] == ent_type
                ents_from_tokens[-1][1] = i + 1
        assert [tuple(ent) for ent in ents_from_tokens] == [
            (ent.start, ent.end, ent.label_) for ent in doc.ents
        ]
        assert {ent.label_ for ent in doc.ents} <= set(LABELS)


def test_empty_and_whitespace_docs():
    nlp = load_trained()
    for text in ("", "   ", "\n", " \t\n "):
        doc = nlp(text)
        assert doc.ents == ()
        assert all(token.ent_iob_ == "O" for token in doc)
    docs = list(nlp.pipe(["", "我在北京市工作", "   ", "\n", "", "张三去了上海"], batch_size=3))
    assert [len(doc.ents) for doc in docs] == [0, 1, 0, 0, 0, 2]
    only_empty = list(nlp.pipe(["", "", "  "], batch_size=4))
    assert all(doc.ents == () for doc in only_empty)


def test_update_and_evaluate_with_empty_docs():
    fix_random_seed(0)
    nlp = make_nlp()
    data = TRAIN_DATA + [("", []), ("   ", []), ("\n", [])]
    examples = make_examples(nlp, data)
    optimizer = nlp.initialize(get_examples=lambda: examples)
    for batch in (examples, examples[-3:], examples[-1:]):
        losses = nlp.update(batch, sgd=optimizer)
        assert numpy.isfinite(losses["crf_ner"])
    assert nlp.update(examples[-3:-2], sgd=optimizer)["crf_ner"] == 0.0
    scores = nlp.evaluate(examples)
    assert 0.0 <= scores["ents_f"] <= 1.0


def test_rehearse_raises_instead_of_doing_nothing():
    """spaCy's TrainablePipe.rehearse does nothing: crf_ner says it does not rehearse, and what to do."""
    fix_random_seed(0)
    nlp = make_nlp()
    examples = make_examples(nlp, TRAIN_DATA)
    optimizer = nlp.initialize(get_examples=lambda: examples)
    raw = [Example.from_dict(nlp.make_doc(text), {}) for text, _ in TRAIN_DATA]
    with pytest.raises(NotImplementedError, match="does not implement rehearse .* exclude=\\['crf_ner'\\]"):
        nlp.rehearse(raw, sgd=optimizer)
    assert nlp.rehearse(raw, sgd=optimizer, exclude=["crf_ner"]) == {}


# ---------------------------------------------------------------------------
# Serialization and batching


@pytest.mark.parametrize("scheme", SCHEMES)
def test_to_disk_and_spacy_load(scheme, tmp_path):
    nlp = load_trained(scheme)
    expected = predictions(nlp.pipe(TEXTS))
    nlp.to_disk(tmp_path)
    nlp2 = spacy.load(tmp_path)
    ner2 = nlp2.get_pipe("crf_ner")
    assert ner2.labels == LABELS
    assert ner2.cfg["scheme"] == scheme
    assert predictions(nlp2.pipe(TEXTS)) == expected
    assert predictions([nlp2(text) for text in TEXTS]) == expected


@pytest.mark.parametrize("scheme", SCHEMES)
def test_to_bytes_and_from_bytes(scheme):
    nlp = load_trained(scheme)
    expected = predictions(nlp.pipe(TEXTS))
    nlp2 = spacy.blank("zh")
    nlp2.add_pipe("crf_ner", config=pipe_config(scheme))
    nlp2.from_bytes(nlp.to_bytes())
    assert nlp2.get_pipe("crf_ner").labels == LABELS
    assert predictions(nlp2.pipe(TEXTS)) == expected
    # The pipe alone round-trips too.
    ner3 = make_nlp(scheme).get_pipe("crf_ner")
    ner3.from_bytes(nlp.get_pipe("crf_ner").to_bytes())
    docs = [ner3(nlp.make_doc(text)) for text in TEXTS]
    assert predictions(docs) == expected


def test_save_weights_float16_halves_the_model_and_loads_in_float32(tmp_path):
    """save_weights "float16": every weight saved as float16 (thinc parameters and torch state dicts),
    loaded back as float32 with the rounded values; the same entities here, the probabilities within
    1e-3; the setting is kept with the pipe, and saving a loaded pipeline again gives the same bytes."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    full = len(ner.model.to_bytes())
    expected = predictions(nlp.pipe(TEXTS))
    ner.save_weights = "float16"
    nlp.to_disk(tmp_path / "half")
    assert (tmp_path / "half" / "crf_ner" / "model").stat().st_size < 0.55 * full
    loaded = spacy.load(tmp_path / "half")
    ner16 = loaded.get_pipe("crf_ner")
    assert ner16.save_weights == "float16"
    pairs = [(a, b) for a, b in zip(ner.model.walk(), ner16.model.walk())]
    for a, b in pairs:
        for name in a.param_names:
            if a.has_param(name):
                value = b.get_param(name)
                assert value.dtype == numpy.float32
                numpy.testing.assert_array_equal(value, a.get_param(name).astype(numpy.float16).astype(numpy.float32))
        for shim_a, shim_b in zip(a.shims, b.shims):
            for (key, ta), tb in zip(shim_a._model.state_dict().items(), shim_b._model.state_dict().values()):
                assert tb.dtype == ta.dtype, key
                if ta.dtype == torch.float32:
                    torch.testing.assert_close(tb, ta.half().float(), rtol=0, atol=0)
    found = predictions(loaded.pipe(TEXTS))
    assert [doc["ents"] for doc in found] == [doc["ents"] for doc in expected]
    for doc, other in zip(found, expected):
        for span, other_span in zip(doc["spans"], other["spans"]):
            assert span[:3] == other_span[:3] and abs(span[3] - other_span[3]) < 1e-3
    loaded.to_disk(tmp_path / "again")
    assert (tmp_path / "again/crf_ner/model").read_bytes() == (tmp_path / "half/crf_ner/model").read_bytes()
    # Back to float32: the (rounded) weights as they are.
    ner16.save_weights = "float32"
    assert len(ner16.model.to_bytes()) == full
    with pytest.raises(ValueError, match="save_weights must be one of"):
        ner.save_weights = "int8"  # only the tables can be: "int8-tables"
    with pytest.raises(ValueError, match="save_weights must be one of"):
        spacy.blank("zh").add_pipe("crf_ner", config={"save_weights": "float64"})


def test_save_weights_int8_tables(tmp_path):
    """save_weights "int8-tables": the embedding tables in int8, each row scaled by its largest
    magnitude / 127, every other weight in float16; loaded back in float32. Each table entry is
    off by at most half its row's step, the model file is smaller than float16's, and saving the
    loaded pipeline again gives the same bytes."""
    from spacy_cner.pipeline.serialization import TABLE_LAYERS

    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.save_weights = "float16"
    half = len(ner.model.to_bytes())
    ner.save_weights = "int8-tables"
    nlp.to_disk(tmp_path / "int8")
    assert (tmp_path / "int8" / "crf_ner" / "model").stat().st_size < 0.75 * half
    loaded = spacy.load(tmp_path / "int8")
    ner8 = loaded.get_pipe("crf_ner")
    assert ner8.save_weights == "int8-tables"
    tables = 0
    for a, b in zip(ner.model.walk(), ner8.model.walk()):
        for name in a.param_names:
            if not a.has_param(name):
                continue
            before, after = a.get_param(name), b.get_param(name)
            assert after.dtype == numpy.float32
            if a.name in TABLE_LAYERS and name == "E":
                tables += 1
                step = numpy.abs(before).max(axis=1, keepdims=True) / 127
                assert (numpy.abs(after - before) <= step / 2 + 1e-7).all()
                numpy.testing.assert_allclose(after / step, numpy.rint(after / step), atol=1e-3)
            else:
                numpy.testing.assert_array_equal(after, before.astype(numpy.float16).astype(numpy.float32))
    assert tables >= 2  # the character and bigram tables
    assert len(predictions(loaded.pipe(TEXTS))) == len(TEXTS)
    loaded.to_disk(tmp_path / "again")
    assert (tmp_path / "again/crf_ner/model").read_bytes() == (tmp_path / "int8/crf_ner/model").read_bytes()


def test_save_weights_float16_with_a_transformer(request, tmp_path):
    """The transformer's weights (torch.save in its shim's bytes) are saved in float16 too."""
    from conftest import small_config_pipeline

    from spacy_cner.pipeline.serialization import _float16_shim

    nlp = small_config_pipeline("bert_crf", request)
    ner = nlp.get_pipe("crf_ner")
    full = len(ner.model.to_bytes())
    ner.save_weights = "float16"
    nlp.to_disk(tmp_path)
    assert (tmp_path / "crf_ner" / "model").stat().st_size < 0.6 * full
    loaded = spacy.load(tmp_path).get_pipe("crf_ner")
    assert {p.dtype for node in loaded.model.walk() for shim in node.shims for p in shim._model.parameters()} == {torch.float32}
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in loaded.pipe([nlp.make_doc(t) for t in TEXTS])] == [
        [(e.start, e.end, e.label_) for e in doc.ents] for doc in ner.pipe([nlp.make_doc(t) for t in TEXTS])]
    with pytest.raises(ValueError, match="set crf_ner's save_weights to 'float32'"):
        _float16_shim(srsly.msgpack_dumps({"config": {}, "state": b"not torch"}))


@pytest.mark.parametrize(
    "edit",
    [
        {"scheme": "BIO"},  # over a BIOES model: fewer tags
        {"labels": ["LOC", "PER"]},  # a label removed
        {"labels": ["LOC", "ORG", "PERSON"]},  # a label renamed: as many tags, other names
    ],
)
def test_cfg_that_disagrees_with_the_weights_is_refused(edit, tmp_path):
    nlp = load_trained("BIOES")
    assert nlp.get_pipe("crf_ner").labels == ("LOC", "ORG", "PER")
    nlp.to_disk(tmp_path)
    cfg_path = tmp_path / "crf_ner" / "cfg"
    srsly.write_json(cfg_path, {**srsly.read_json(cfg_path), **edit})
    with pytest.raises(ValueError, match=f"{cfg_path}.*do not belong together"):
        spacy.load(tmp_path)
    ner_bytes = srsly.msgpack_loads(nlp.get_pipe("crf_ner").to_bytes())
    ner_bytes["cfg"] = srsly.json_dumps({**srsly.json_loads(ner_bytes["cfg"]), **edit})
    with pytest.raises(ValueError, match="the cfg in the bytes"):
        make_nlp().get_pipe("crf_ner").from_bytes(srsly.msgpack_dumps(ner_bytes))


def test_pipe_batches_equal_one_by_one():
    nlp = load_trained()
    one_by_one = predictions([nlp(text) for text in TEXTS])
    assert predictions(nlp.pipe(TEXTS, batch_size=2)) == one_by_one
    assert predictions(nlp.pipe(TEXTS, batch_size=1)) == one_by_one
    assert predictions(nlp.pipe(TEXTS)) == one_by_one
    assert predictions(nlp.pipe(TEXTS)) == one_by_one


SUBPROCESS_SCRIPT = """
import json, os, signal, sys
out = {}
import spacy
assert "spacy_cner" not in sys.modules
nlp = spacy.blank("zh")
nlp.add_pipe("crf_ner")
out["factory"] = nlp.pipe_names
print(json.dumps(out), flush=True)

def predictions(docs):
    return [
        {"ents": [[e.start, e.end, e.label_] for e in doc.ents],
         "iob": [t.ent_iob_ for t in doc], "types": [t.ent_type_ for t in doc],
         "spans": [[s.start, s.end, s.label_, round(float(p), 5)]
                   for s, p in zip(doc.spans["crf_ner"], doc.spans["crf_ner"].attrs["scores"])]}
        for doc in docs
    ]

with open("texts.json", encoding="utf8") as file_:
    texts = json.load(file_)
nlp = spacy.load("model")
out["load"] = predictions(nlp.pipe(texts))
print(json.dumps(out), flush=True)
# A hung multiprocessing pipe is a failure, not a stuck test run: end this
# process group (this script and its workers, which hold stdout open).
signal.signal(signal.SIGALRM, lambda *_: os.killpg(0, signal.SIGKILL))
signal.alarm(45)
out["n_process"] = predictions(nlp.pipe(texts, n_process=2, batch_size=2))
print(json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def subprocess_result(tmp_path_factory):
    """Run SUBPROCESS_SCRIPT (which never imports spacy_cner) on the saved pipeline."""
    workdir = tmp_path_factory.mktemp("subprocess")
    nlp = load_trained()
    nlp.to_disk(workdir / "model")
    srsly.write_json(workdir / "texts.json", TEXTS)
    expected = json.loads(json.dumps(predictions(nlp.pipe(TEXTS))))
    result = run_python(SUBPROCESS_SCRIPT, cwd=workdir)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    out = json.loads(lines[-1]) if lines else {}
    return out, expected, result


def _subprocess_value(subprocess_result, key):
    out, expected, result = subprocess_result
    if key not in out:
        hung = " (-9: it hung and was killed)" if result.returncode == -signal.SIGKILL else ""
        pytest.fail(
            f"the subprocess gave no {key!r}, rc {result.returncode}{hung}:\n{result.stderr[-3000:]}"
        )
    return out[key], expected


def test_entry_points_match_registry():
    """Every registered spacy-cner function has a setup.cfg entry point in its registry's group."""
    factories = {ep.name: ep for ep in entry_points(group="spacy_factories")}
    assert factories["crf_ner"].load() is make_crf_ner
    groups = {"spacy_architectures": registry.architectures, "thinc_layers": registry.layers}
    for group, group_registry in groups.items():
        points = {ep.name: ep for ep in entry_points(group=group) if ep.value.startswith("spacy_cner")}
        registered = {name for name in group_registry.get_all() if name.startswith("spacy-cner.")}
        assert set(points) == registered, group
        for name, point in points.items():
            assert point.load() is group_registry.get(name), name


def test_factory_from_entry_points(subprocess_result):
    """`crf_ner` is found through setup.cfg's entry points, without importing spacy_cner."""
    factory, _ = _subprocess_value(subprocess_result, "factory")
    assert factory == ["crf_ner"]


def test_spacy_load_without_import(subprocess_result):
    loaded, expected = _subprocess_value(subprocess_result, "load")
    assert loaded == expected


def test_pipe_n_process(subprocess_result):
    multi, expected = _subprocess_value(subprocess_result, "n_process")
    assert multi == expected


# ---------------------------------------------------------------------------
# Entities set before crf_ner


@pytest.mark.parametrize("scheme", SCHEMES)
def test_entity_ruler_before(scheme):
    """Pre-set entities are kept exactly, known label or not, and predicted around."""
    nlp = load_trained(scheme)
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    # The model predicts 北京市 and 上海 as LOC: the ruler sets a shorter LOC and
    # a label the model does not know.
    ruler.add_patterns([{"label": "LOC", "pattern": "北京"}, {"label": "GPE", "pattern": "上海"}])
    doc = nlp("我在北京市工作")
    assert [(ent.text, ent.start, ent.end, ent.label_) for ent in doc.ents if ent.start < 4] == [
        ("北京", 2, 4, "LOC")
    ]
    assert [token.ent_iob_ for token in doc][:4] == ["O", "O", "B", "I"]
    # 市 may start a new entity but must not extend the pre-set one.
    assert doc[4].ent_iob_ != "I"
    doc = nlp("张三去了上海")
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("张三", "PER"), ("上海", "GPE")]
    assert [token.ent_iob_ for token in doc] == ["B", "I", "O", "O", "B", "I"]
    assert [token.ent_type_ for token in doc] == ["PER", "PER", "", "", "GPE", "GPE"]


def test_prediction_from_several_threads_equals_serial():
    """A pipeline shared by threads (a web server's) predicts as it does serially: predict never puts
    a torch module back into training mode (dropout 0.5 here would change its outputs)."""
    import threading

    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {**SMALL_MODEL, "encoder": {**SMALL_MODEL["encoder"], "dropout": 0.5}}
    nlp.add_pipe("crf_ner", config={"model": model})
    train(nlp, make_examples(nlp), n_steps=10)
    texts = [text for text in TEXTS if text] * 20
    serial = predictions(nlp.pipe(texts))
    found = {}

    def work(i: int) -> None:
        found[i] = predictions([nlp(text) for text in texts])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(found[i] == serial for i in range(4))
    nlp.update(make_examples(nlp), sgd=nlp.resume_training())  # training still trains in training mode
    assert torch_module(nlp.get_pipe("crf_ner").model.get_ref("encoder")).training


def test_every_entity_has_its_score_and_keeps_it_saved():
    """ent._.score for every doc.ents entity (an entity_ruler's unknown label: 1, and in the span
    group too, where the README's idiom used to fail), kept by to_bytes, DocBin and to_json."""
    from spacy.tokens import Doc, DocBin

    nlp = load_trained()
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    ruler.add_patterns([{"label": "APP", "pattern": "微信"}])
    doc = nlp("张三去了上海用微信")
    ents = [(ent.text, ent.label_) for ent in doc.ents]
    assert ("微信", "APP") in ents and ("张三", "PER") in ents
    group = doc.spans["crf_ner"]
    in_group = dict(zip([(s.start, s.end, s.label_) for s in group], group.attrs["scores"].tolist()))
    for ent in doc.ents:
        assert isinstance(ent._.score, float) and 0.0 < ent._.score <= 1.0
        assert in_group[(ent.start, ent.end, ent.label_)] == pytest.approx(ent._.score, abs=1e-6)
    assert [ent._.score for ent in doc.ents if ent.label_ == "APP"] == [1.0]
    scores = [ent._.score for ent in doc.ents]
    assert [ent._.score for ent in Doc(nlp.vocab).from_bytes(doc.to_bytes()).ents] == scores
    (loaded,) = DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab)
    assert [ent._.score for ent in loaded.ents] == scores
    as_json = doc.to_json(underscore=["score"])["underscore_span"]["score"]
    assert sorted((item["start"], item["end"], item["value"]) for item in as_json) == sorted(
        (ent.start_char, ent.end_char, ent._.score) for ent in doc.ents
    )


def test_a_span_a_later_ruler_relabels_has_no_crf_score():
    """An entity_ruler after crf_ner (overwrite_ents) relabelling a span crf_ner found: ent._.score kept
    crf_ner's probability for the other label (spaCy keys span values by characters only); it is None
    now, as it is in the span group's scores, and the span crf_ner left alone keeps its score."""
    from spacy.tokens import Doc

    nlp = load_trained()
    doc = nlp("张三去了上海")
    found = {(ent.start_char, ent.end_char): (ent.label_, ent._.score) for ent in doc.ents}
    assert found[(0, 2)][0] == "PER" and found[(4, 6)][0] == "LOC"
    ruler = nlp.add_pipe("entity_ruler", after="crf_ner", config={"overwrite_ents": True})
    ruler.add_patterns([{"label": "CITY", "pattern": "上海"}])
    doc = nlp("张三去了上海")
    scores = {(ent.start_char, ent.end_char, ent.label_): ent._.score for ent in doc.ents}
    assert scores == {(0, 2, "PER"): found[(0, 2)][1], (4, 6, "CITY"): None}
    assert [ent._.score for ent in Doc(nlp.vocab).from_bytes(doc.to_bytes()).ents] == [found[(0, 2)][1], None]


def test_a_ruler_entity_with_an_id_is_in_the_span_group_as_in_doc_ents():
    """The README's span-group loop tells entities from alternatives by `span in doc.ents`: an entity_ruler's
    span with an id (and kb_id) must be the doc's own span in the group, not a copy without them."""
    nlp = load_trained()
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    ruler.add_patterns([{"label": "APP", "pattern": "微信", "id": "wechat"}])
    doc = nlp("张三去了上海用微信")
    group = doc.spans["crf_ner"]
    (app,) = [span for span in group if span.label_ == "APP"]
    assert app.id_ == "wechat" and app in doc.ents
    assert all(ent in group for ent in doc.ents)


def test_no_scores_without_probabilities():
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.spans_key, ner.ents_threshold = None, None
    doc = nlp("张三去了上海")
    assert doc.ents and all(ent._.score is None for ent in doc.ents) and "crf_ner" not in doc.spans


@pytest.mark.parametrize("scheme", SCHEMES)
def test_preset_ents_keep_kb_id(scheme):
    """As in spaCy's ner: a pre-set entity keeps its kb_id; new ones have none."""
    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc("张三去了上海")
    doc.ents = [Span(doc, 4, 6, label="LOC", kb_id="Q8686")]
    doc = ner(doc)
    assert [(ent.text, ent.label_, ent.kb_id_) for ent in doc.ents] == [
        ("张三", "PER", ""),
        ("上海", "LOC", "Q8686"),
    ]


def test_preset_missing_and_outside_tokens():
    """Only B/I tokens are fixed: "O" and missing ones are predicted (spaCy's ner does too)."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc("张三去了上海")
    doc.set_ents([], default="outside")
    expected = [(ent.start, ent.end, ent.label_) for ent in nlp("张三去了上海").ents]
    assert [(ent.start, ent.end, ent.label_) for ent in ner(doc).ents] == expected
    doc = nlp.make_doc("张三去了上海")
    doc.set_ents([Span(doc, 4, 6, "GPE")], default="missing")
    doc = ner(doc)
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("张三", "PER"), ("上海", "GPE")]


# ---------------------------------------------------------------------------
# Missing annotation is marginalised, not taught "O"


def _initialized(labels, scheme):
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    ner = nlp.get_pipe("crf_ner")
    ner.initialize(lambda: make_examples(nlp), nlp=nlp, labels=labels)
    return nlp, ner


def _loss(ner, example):
    scores = ner.model.predict([example.predicted])
    loss, d_scores = ner.get_loss([example], scores)
    return loss, ner.model.ops.to_numpy(d_scores[0]), ner.model.ops.to_numpy(scores[0])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_all_missing_gives_no_loss(scheme):
    nlp, ner = _initialized(None, scheme)
    text = "我在北京市工作"
    no_ents = Example.from_dict(nlp.make_doc(text), {})
    dashes = Example.from_dict(nlp.make_doc(text), {"entities": ["-"] * len(text)})
    reference = nlp.make_doc(text)
    reference.set_ents([], default="missing")
    missing = Example(nlp.make_doc(text), reference)
    teach_o = Example.from_dict(nlp.make_doc(text), {"entities": []})
    for example in (no_ents, dashes, missing):
        loss, d_scores, _ = _loss(ner, example)
        assert abs(loss) < 1e-4
        assert_allclose(d_scores, 0.0, atol=1e-6)
    loss, d_scores, _ = _loss(ner, teach_o)
    # The untrained model is unsure, so teaching "O" costs something.
    assert loss > 0.1
    assert numpy.abs(d_scores).max() > 1e-3


@pytest.mark.parametrize("scheme", SCHEMES)
def test_partial_annotation_is_masked(scheme):
    nlp, ner = _initialized(None, scheme)
    text = "张三去了上海"
    o_index = ner.tag_names.index("O")
    partial_ref = nlp.make_doc(text)
    partial_ref.set_ents([Span(partial_ref, 4, 6, "LOC")], default="missing")
    outside_ref = nlp.make_doc(text)
    outside_ref.set_ents([Span(outside_ref, 4, 6, "LOC")], default="outside")
    partial = Example(nlp.make_doc(text), partial_ref)
    outside = Example(nlp.make_doc(text), outside_ref)
    assert partial.get_aligned_ner() == [None] * 4 + ["B-LOC", "L-LOC"]
    partial_loss, d_partial, _ = _loss(ner, partial)
    outside_loss, d_outside, _ = _loss(ner, outside)
    # Fewer constraints, higher likelihood.
    assert partial_loss <= outside_loss + 1e-5
    assert partial_loss < outside_loss
    missing = slice(0, 4)
    # "Teach O" pushes the O scores of the unannotated tokens up (negative
    # gradient) by 1 - p(O); marginalising pushes them less, or not at all.
    assert (d_partial[missing, o_index] > d_outside[missing, o_index] + 1e-3).all()
    assert not numpy.allclose(d_partial[missing], d_outside[missing], atol=1e-4)
    # "-" tags in Example.from_dict mean the same as default="missing".
    dashes = Example.from_dict(nlp.make_doc(text), {"entities": ["-"] * 4 + ["B-LOC", "L-LOC"]})
    dashes_loss, d_dashes, _ = _loss(ner, dashes)
    assert dashes_loss == pytest.approx(partial_loss, abs=1e-5)
    assert_allclose(d_dashes, d_partial, atol=1e-6)


def _brute_force_nll(ner, emissions, allowed_tags):
    """-log P(tag path in allowed_tags) by summing over every tag sequence."""
    crf = torch_module(ner.model.get_ref("crf"))
    names = ("start_transitions", "transitions", "end_transitions")
    scores = tuple(getattr(crf, name).detach().double().numpy() for name in names)  # forbidden entries included
    emissions = numpy.asarray(emissions, dtype="f8")
    paths = list(all_paths(*emissions.shape[::-1]))
    gold = [path for path in paths if all(tag in allowed for tag, allowed in zip(path, allowed_tags))]
    return log_sum_paths(scores, emissions, paths) - log_sum_paths(scores, emissions, gold)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_partial_loss_matches_brute_force(scheme):
    """The loss is -log of the probability of the paths agreeing with the known tags."""
    nlp, ner = _initialized(["LOC"], scheme)
    tag = {name: i for i, name in enumerate(ner.tag_names)}
    every = set(range(len(tag)))
    last = "E-LOC" if scheme == "BIOES" else "I-LOC"
    text = "在北京市"
    biluo = ["-", "B-LOC", "L-LOC", "-"]
    example = Example.from_dict(nlp.make_doc(text), {"entities": biluo})
    assert example.get_aligned_ner() == [None, "B-LOC", "L-LOC", None]
    loss, _, emissions = _loss(ner, example)
    allowed = [every, {tag["B-LOC"]}, {tag[last]}, every]
    assert loss == pytest.approx(_brute_force_nll(ner, emissions, allowed), abs=1e-4)
    full = ["O", "B-LOC", "I-LOC", "L-LOC"]
    example = Example.from_dict(nlp.make_doc(text), {"entities": full})
    loss, _, emissions = _loss(ner, example)
    allowed = [{tag["O"]}, {tag["B-LOC"]}, {tag["I-LOC"]}, {tag[last]}]
    assert loss == pytest.approx(_brute_force_nll(ner, emissions, allowed), abs=1e-4)


# ---------------------------------------------------------------------------
# Word tokens and misaligned gold


WORD_DATA = [
    (["我", "在", "北京市", "工作"], ["O", "O", "U-LOC", "O"]),
    (["张三", "去了", "上海"], ["U-PER", "O", "U-LOC"]),
    (["李四", "是", "阿里巴巴", "的", "员工"], ["U-PER", "O", "U-ORG", "O", "O"]),
]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_word_segmented_docs(scheme):
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    examples = [
        Example.from_dict(Doc(nlp.vocab, words=words), {"entities": tags}) for words, tags in WORD_DATA
    ]
    train(nlp, examples, n_steps=30)
    ner = nlp.get_pipe("crf_ner")
    doc = ner(Doc(nlp.vocab, words=["我", "在", "北京市", "工作"]))
    assert [(ent.start, ent.end, ent.text, ent.label_) for ent in doc.ents] == [(2, 3, "北京市", "LOC")]
    assert [token.ent_iob_ for token in doc] == ["O", "O", "B", "O"]
    docs = list(ner.pipe([Doc(nlp.vocab, words=words) for words, _ in WORD_DATA], batch_size=2))
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    assert [len(doc.ents) for doc in docs] == [1, 2, 2]


def test_misaligned_gold():
    fix_random_seed(0)
    nlp = make_nlp()
    ner = nlp.get_pipe("crf_ner")
    predicted = Doc(nlp.vocab, words=["我在", "北京", "市工作"])
    misaligned = Example.from_dict(
        predicted, {"words": ["我", "在", "北京市", "工作"], "entities": ["O", "O", "U-LOC", "O"]}
    )
    # Gold that is not one-to-one with the predicted tokens is missing there.
    assert misaligned.get_aligned_ner() == ["O", None, None]
    # Characters predicted, words in the gold: the entity still aligns.
    chars = Example.from_dict(
        nlp.make_doc("张三去了上海"),
        {"words": ["张三", "去了", "上海"], "entities": ["U-PER", "O", "U-LOC"]},
    )
    assert chars.get_aligned_ner() == ["B-PER", "L-PER", "O", "O", "B-LOC", "L-LOC"]
    examples = [misaligned, chars]
    optimizer = nlp.initialize(get_examples=lambda: examples)
    assert ner.labels == ("LOC", "PER")
    for _ in range(2):
        losses = nlp.update(examples, sgd=optimizer)
        assert numpy.isfinite(losses["crf_ner"])
    scores = nlp.evaluate(examples)
    assert "ents_f" in scores


# ---------------------------------------------------------------------------
# Long docs: tagged in windows cut after sentence ends


LONG_TEXT = "。".join(t for t, _ in TRAIN_DATA) + "！王五在深圳工作\n腾讯总部在深圳。" * 3


def char_entities(doc, offset=0):
    return [(ent.start_char + offset, ent.end_char + offset, ent.label_) for ent in doc.ents]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_long_doc_is_tagged_as_its_windows(scheme):
    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = 12
    doc = nlp.make_doc(LONG_TEXT)
    windows = doc_windows(doc, 12)
    assert len(windows) > 4 and all(w.start == w.own_start and w.end == w.own_end for w in windows)
    expected = []
    for w in windows:
        expected += char_entities(nlp(doc[w.start : w.end].text), doc[w.start].idx)
    assert char_entities(nlp(LONG_TEXT)) == expected
    assert any(label == "PER" for _, _, label in expected)
    # A doc no longer than the window is tagged whole, as with windows off.
    ner.long_doc_window = 0
    whole = [char_entities(nlp(t)) for t, _ in TRAIN_DATA]
    ner.long_doc_window = 12
    assert [char_entities(nlp(t)) for t, _ in TRAIN_DATA] == whole


def test_a_long_docs_windows_go_to_the_model_in_small_calls(monkeypatch):
    """A long doc's windows are scored WINDOW_BATCH_TOKENS tokens per model call at most (their
    activations are the peak of a long doc's memory, on top of the doc), short docs
    EMISSION_BATCH_TOKENS; the entities are those of one call per window."""
    from spacy_cner import long_docs

    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = 12
    text = "张三去了上海。李四在北京工作。" * 20
    expected = [(e.start, e.end, e.label_) for e in nlp(text).ents]
    calls = []
    predict = type(ner.model).predict
    monkeypatch.setattr(type(ner.model), "predict", lambda model, docs: calls.append(sum(map(len, docs))) or predict(model, docs))
    monkeypatch.setattr(long_docs, "WINDOW_BATCH_TOKENS", 30)
    monkeypatch.setattr(long_docs, "EMISSION_BATCH_TOKENS", 1000)
    assert [(e.start, e.end, e.label_) for e in nlp(text).ents] == expected
    assert len(calls) > 5 and max(calls) <= 30
    calls.clear()
    list(nlp.pipe(["张三去了上海。"] * 40))
    assert max(calls) > 30  # short docs: EMISSION_BATCH_TOKENS per call


@pytest.mark.parametrize("scheme", SCHEMES)
def test_long_sentence_gets_valid_tags_from_overlapping_windows(scheme):
    nlp = load_trained(scheme)
    nlp.get_pipe("crf_ner").long_doc_window = 6
    nlp.get_pipe("crf_ner").ents_threshold = None  # the best path: tag ids to check
    text = "".join(t for t, _ in TRAIN_DATA)  # no sentence end: one long sentence
    doc = nlp(text)
    ner = nlp.get_pipe("crf_ner")
    tags = ner.predict([nlp.make_doc(text)]).tag_ids[0].tolist()
    assert is_valid_sequence(tags, ner.tag_names)
    assert len(doc.ents) >= 3
    assert predictions(nlp.pipe([text, "张三去了上海", text], batch_size=3))[0] == predictions([doc])[0]


def test_long_doc_in_a_batch_equals_apart():
    nlp = load_trained()
    nlp.get_pipe("crf_ner").long_doc_window = 10
    texts = ["张三去了上海", LONG_TEXT, "", "李四是阿里巴巴的员工", LONG_TEXT[:9]]
    apart = predictions([nlp(t) for t in texts])
    assert predictions(nlp.pipe(texts, batch_size=len(texts))) == apart


def test_long_doc_keeps_a_preset_entity_across_a_sentence_end():
    nlp = load_trained()
    nlp.get_pipe("crf_ner").long_doc_window = 8
    nlp.get_pipe("crf_ner").ents_threshold = None  # the best path: tag ids to check
    doc = nlp.make_doc(LONG_TEXT)
    period = LONG_TEXT.index("。")
    doc.ents = [Span(doc, period - 2, period + 3, "ORG")]  # "工作。张三"
    tagged = nlp.get_pipe("crf_ner")(doc)
    assert (period - 2, period + 3, "ORG") in [(e.start, e.end, e.label_) for e in tagged.ents]
    assert is_valid_sequence(nlp.get_pipe("crf_ner").predict([doc]).tag_ids[0].tolist(), nlp.get_pipe("crf_ner").tag_names)


def test_long_doc_window_setting():
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="long_doc_window"):
        nlp.add_pipe("crf_ner", config={"long_doc_window": 1})
    assert nlp.add_pipe("crf_ner", config={"long_doc_window": 0}).long_doc_window == 0


# ---------------------------------------------------------------------------
# Training on joined pairs (join_examples)


def _entity_texts(example: Example) -> List[Tuple[str, str]]:
    return [(ent.text, ent.label_) for ent in example.reference.ents]


def test_join_pairs_keeps_every_token_and_entity():
    nlp = spacy.blank("zh")
    examples = make_examples(nlp)
    random.seed(1)
    joined = join_pairs(examples, 1.0)
    assert len(joined) == 3  # two pairs and the odd one out
    assert sum(len(eg.predicted) for eg in joined) == sum(len(eg.predicted) for eg in examples)
    texts = {eg.text for eg in examples}
    pairs = [eg for eg in joined if eg.text not in texts]
    assert len(pairs) == 2
    for eg in pairs:
        first = next(e for e in examples if eg.text.startswith(e.text))
        second = next(e for e in examples if eg.text == first.text + e.text)
        assert _entity_texts(eg) == _entity_texts(first) + _entity_texts(second)
        # The joint is no sentence start: a text joined before tokenization has none there.
        assert not eg.predicted[len(first.predicted)].is_sent_start
        assert eg.get_aligned_ner() == first.get_aligned_ner() + second.get_aligned_ner()


def test_join_pairs_share():
    nlp = spacy.blank("zh")
    examples = make_examples(nlp) * 20
    random.seed(0)
    assert join_pairs(examples, 0.0) == examples
    n_joined = [100 - len(join_pairs(examples, 0.3)) for _ in range(200)]  # one fewer per pair
    assert abs(numpy.mean(n_joined) - 15) < 1.0


def test_join_examples_setting_trains_on_pairs(monkeypatch):
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="join_examples"):
        nlp.add_pipe("crf_ner", config={"join_examples": 1.5})
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={**pipe_config("BIOES"), "join_examples": 1.0})
    examples = make_examples(nlp)
    seen = []

    def spy(batch, share):
        joined = join_pairs(batch, share)
        seen.append([eg.text for eg in joined])
        return joined

    monkeypatch.setattr(crf_ner_module, "join_pairs", spy)
    losses = train(nlp, examples, n_steps=60)
    assert all(len(batch) == 3 for batch in seen)
    assert len({tuple(sorted(batch)) for batch in seen}) > 5  # fresh pairs each step
    assert losses[-1] < losses[0] / 5
    assert nlp.evaluate(make_examples(nlp))["ents_f"] == 1.0


# ---------------------------------------------------------------------------
# Entity probabilities in doc.spans (spans_key, candidate_threshold, ents_threshold)


def scored(doc, key="crf_ner"):
    return {(s.start, s.end, s.label_): float(p) for s, p in zip(doc.spans[key], doc.spans[key].attrs["scores"])}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_spans_hold_the_entities_with_their_exact_probabilities(scheme):
    from spacy_cner.layers.crf_posteriors import span_log_probs

    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    texts = [t for t in TEXTS if t.strip()] + ["王五在阿里巴巴上海总部", "张三李四"]
    for doc in nlp.pipe(texts):
        found = scored(doc)
        ents = [(e.start, e.end, e.label_) for e in doc.ents]
        assert set(ents) <= set(found)
        emissions = ner.model.predict([doc])
        # The same constraints as decoding: no entity starts on whitespace.
        (allowed,) = preset_constraints(nlp.make_doc(doc.text), [(0, len(doc))], ner.tag_set)
        masks = None if allowed is None else [allowed]
        exact = span_log_probs(ner.model.get_ref("crf"), emissions, [list(found)], scheme, masks)[0]
        assert_allclose([found[span] for span in found], numpy.exp(exact), rtol=1e-5, atol=1e-6)
        assert all(found[span] >= 0.1 for span in found if span not in ents)
    doc = nlp("我在北京市工作")
    assert scored(doc)[(2, 5, "LOC")] > 0.5


def test_scoring_settings():
    nlp = load_trained()
    text = "王五在阿里巴巴上海总部，张三李四"
    with_scores = nlp(text)
    probabilities = {(e.start, e.end, e.label_): scored(with_scores)[(e.start, e.end, e.label_)] for e in with_scores.ents}
    assert len(probabilities) >= 2
    ner = nlp.get_pipe("crf_ner")
    ner.spans_key = None
    plain = nlp(text)
    assert "crf_ner" not in plain.spans
    assert [e.text for e in plain.ents] == [e.text for e in with_scores.ents]
    # ents_threshold leaves out the predicted entities below it, whatever spans_key is.
    # Halfway between two entities' probabilities: an entity right at the threshold would be
    # kept or not by the last bit of a recomputed float.
    values = sorted(probabilities.values())
    cut = (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    ner.ents_threshold = cut
    kept = {(e.start, e.end, e.label_) for e in nlp(text).ents}
    assert kept == {span for span, p in probabilities.items() if p >= cut}
    assert kept and kept != set(probabilities)
    ner.spans_key, ner.candidate_threshold, ner.ents_threshold = "scores", 1.5, None
    only_ents = nlp(text)
    assert set(scored(only_ents, "scores")) == set(probabilities)
    for bad in ({"candidate_threshold": 0}, {"candidate_threshold": 0.0001}, {"ents_threshold": 1.5}, {"ents_threshold": 0}):
        with pytest.raises(ValueError, match=list(bad)[0]):
            spacy.blank("zh").add_pipe("crf_ner", config=bad)


def test_scores_survive_docbin_and_preset_entities_are_sure():
    nlp = load_trained()
    doc = nlp.make_doc("张三在北京市工作")
    doc.ents = [Span(doc, 3, 6, "ORG")]  # pre-set, against the model's LOC
    doc = nlp.get_pipe("crf_ner")(doc)
    assert scored(doc)[(3, 6, "ORG")] == pytest.approx(1.0)
    restored = list(DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab))[0]
    assert scored(restored) == scored(doc)


# Held-out examples the overfit model partly gets wrong.
HELD_OUT = [
    ("张三在深圳工作", [(0, 2, "PER"), (3, 5, "LOC")]),
    ("李四去了北京", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("阿里巴巴总部在杭州", [(0, 4, "ORG"), (7, 9, "LOC")]),
    ("王五是腾讯的员工", [(0, 2, "PER"), (3, 5, "ORG")]),
]


def test_fit_temperature_changes_probabilities_not_entities(tmp_path):
    from spacy_cner.training.reliability import expected_calibration_error

    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    # The overfit model is over-confident on the held-out examples.
    held_out = make_examples(nlp, HELD_OUT)
    before = [(predictions([nlp(eg.text)])[0]) for eg in held_out]
    report = ner.fit_temperature(held_out)
    assert ner.cfg["temperature"] == report["temperature"] != 1.0
    assert report["n_entities"] > 0 and report["log_loss_after"] <= report["log_loss_before"]
    after = [(predictions([nlp(eg.text)])[0]) for eg in held_out]
    assert [p["ents"] for p in after] == [p["ents"] for p in before]
    assert [p["spans"] for p in after] != [p["spans"] for p in before]
    nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("crf_ner").cfg["temperature"] == report["temperature"]
    # ECE: |accuracy - confidence| per bin, weighted by the bin's share.
    probs, right = numpy.asarray([0.95, 0.95, 0.55, 0.15]), numpy.asarray([1.0, 0.0, 1.0, 0.0])
    assert expected_calibration_error(probs, right) == pytest.approx(0.5 * 0.45 + 0.25 * 0.45 + 0.25 * 0.15)


def test_fit_temperature_without_predicted_entities_keeps_probabilities_as_they_are():
    """A model that predicts nothing on dev (early in training) gives nothing to fit: temperature 1."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.cfg["temperature"] = 2.0
    nothing = (numpy.zeros((0,)), numpy.zeros((0,)))
    report = ner.fit_temperature(make_examples(nlp, HELD_OUT), outcomes=lambda temperature: nothing)
    assert report["temperature"] == ner.cfg["temperature"] == 1.0 and report["n_entities"] == 0


def test_ents_threshold_decodes_the_most_probable_spans():
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.cfg["temperature"] = 6.0  # flat probabilities: many spans between 0.1 and 1/2
    texts = [t for t in TEXTS if t.strip()] + [text for text, _ in HELD_OUT]
    # The default, "fitted", decodes the best path until a threshold is fitted.
    assert ner.ents_threshold == "fitted" and ner.entity_threshold is None
    best = [p["ents"] for p in predictions(nlp.pipe(texts))]
    ner.ents_threshold = None
    assert [p["ents"] for p in predictions(nlp.pipe(texts))] == best
    ner.ents_threshold = 0.15
    decoded = [nlp(text) for text in texts]
    for doc in decoded:
        ents = [(e.start, e.end, e.label_) for e in doc.ents]
        assert ents == most_probable_spans(scored(doc), 0.15)
    assert [p["ents"] for p in predictions(decoded)] != best
    # The same entities without the span group; a threshold below candidate_threshold
    # scores the spans it needs, and the group still shows those above candidate_threshold.
    ner.spans_key = None
    assert [p["ents"] for p in predictions(nlp.pipe(texts))] == [p["ents"] for p in predictions(decoded)]
    ner.spans_key, ner.candidate_threshold, ner.ents_threshold = "crf_ner", 0.3, 0.15
    for doc, before in zip(nlp.pipe(texts), decoded):
        assert [(e.start, e.end, e.label_) for e in doc.ents] == [(e.start, e.end, e.label_) for e in before.ents]
        ents = {(e.start, e.end, e.label_) for e in doc.ents}
        assert all(p >= 0.3 or span in ents for span, p in scored(doc).items())
    # Pre-set entities are kept, and the spans around them decoded as before.
    doc = nlp.make_doc("张三在北京市工作")
    doc.ents = [Span(doc, 3, 6, "ORG")]
    assert (3, 6, "ORG") in {(e.start, e.end, e.label_) for e in ner(doc).ents}


@pytest.mark.parametrize("long_doc_window", [0, 8])
def test_threshold_decoding_skips_the_best_path(monkeypatch, long_doc_window):
    """doc.ents at a threshold need only the probabilities: no Viterbi pass, and the entities
    are the most probable spans of the probabilities scored beside the best path (long docs
    decoded in windows too)."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = long_doc_window
    texts = [t for t in TEXTS if t.strip()] + [text for text, _ in HELD_OUT] + [LONG_TEXT]
    ner.ents_threshold = 0.2
    docs = [nlp.make_doc(text) for text in texts]
    scored = ner._span_scores(len(docs), ner._decode(docs, best_path=True), 0.1, ner.cfg.get("temperature", 1.0))
    expected = [most_probable_spans(doc_scores, 0.2) for doc_scores in scored]
    assert any(expected)
    calls = []
    original = decoding.crf_decode
    monkeypatch.setattr(decoding, "crf_decode", lambda *args: calls.append(1) or original(*args))
    assert ner.predict(docs[:1]).tag_ids is None
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)] == expected
    assert not calls
    ner.ents_threshold = None
    nlp(texts[0])
    assert calls


def test_set_annotations_decodes_as_predict_did():
    """A tagging keeps its decoding: set_annotations does not read a threshold changed since."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc(TEXTS[0])
    ner.ents_threshold = 0.2
    at_threshold = ner.predict([doc])
    ner.ents_threshold = None
    best_path = ner.predict([doc])
    ner.ents_threshold = 0.2
    ner.set_annotations([doc], best_path)
    assert doc.ents
    ner.ents_threshold = None
    ner.set_annotations([doc], at_threshold)
    assert [(e.start, e.end, e.label_) for e in doc.ents] == most_probable_spans(at_threshold.scores[0], 0.2)


def test_fit_threshold_is_half_the_dev_f1_until_an_update(tmp_path):
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    held_out = make_examples(nlp, HELD_OUT)
    ner.ents_threshold = None
    best_path = nlp.evaluate(held_out)["ents_f"]
    assert 0.2 < best_path < 1.0  # the overfit model gets some held-out entities wrong
    ner.ents_threshold = "fitted"
    fit = ner.fit_threshold(held_out)
    assert fit["f1"] == pytest.approx(best_path)
    assert ner.entity_threshold == fit["threshold"] == pytest.approx(best_path / 2, abs=1e-4)
    ner.cfg["temperature"] = 6.0  # flat probabilities, so that the threshold changes entities
    texts = [text for text, _ in HELD_OUT] + [t for t in TEXTS if t.strip()]
    docs = list(nlp.pipe(texts))
    for doc in docs:
        assert [(e.start, e.end, e.label_) for e in doc.ents] == most_probable_spans(scored(doc), fit["threshold"])
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("crf_ner").entity_threshold == fit["threshold"]
    assert predictions(loaded.pipe(texts)) == predictions(docs)
    # An update changes the weights the threshold was fitted for: back to the best path.
    nlp.update(make_examples(nlp), sgd=nlp.resume_training())
    assert ner.entity_threshold is None and ner.ents_threshold == "fitted"
    # An untrained model's threshold is at least 0.1.
    untrained = make_nlp()
    untrained.initialize(get_examples=lambda: make_examples(untrained))
    assert untrained.get_pipe("crf_ner").fit_threshold(make_examples(untrained, HELD_OUT))["threshold"] >= 0.1
    for bad in (1.5, "best", -0.1):
        with pytest.raises(ValueError, match="ents_threshold"):
            spacy.blank("zh").add_pipe("crf_ner", config={"ents_threshold": bad})


def test_calibrate_callback_scores_from_its_own_decoding_as_evaluate_does(tmp_path, monkeypatch):
    """After the fits, meta["performance"] comes from the fits' decoding of dev (no second pass of
    the pipeline) and equals nlp.evaluate's, per type too, whatever evaluate's batches; a pipeline
    of more than the pipe is evaluated again."""
    nlp = load_trained()
    dev = HELD_OUT + TRAIN_DATA + [("今天天气很好", []), ("上海", [(0, 2, "LOC")])]
    DocBin(docs=[eg.reference for eg in make_examples(nlp, dev)]).to_disk(tmp_path / "dev.spacy")
    make = registry.misc.get("spacy-cner.calibrate.v1")
    keys = ("ents_f", "ents_p", "ents_r", "ents_per_type")
    nlp.meta["performance"] = dict.fromkeys(keys, 0.0)
    evaluate = nlp.evaluate

    def second_pass(*args, **kwargs):
        raise AssertionError("nlp.evaluate ran")

    monkeypatch.setattr(nlp, "evaluate", second_pass)
    make(path=str(tmp_path / "dev.spacy"))(nlp)
    monkeypatch.undo()
    assert nlp.get_pipe("crf_ner").entity_threshold is not None
    for batch_size in (1, 3, 64):
        scores = nlp.evaluate(make_examples(nlp, dev), batch_size=batch_size)
        assert nlp.meta["performance"] == {key: scores[key] for key in keys}
    assert nlp.meta["performance"]["ents_per_type"]
    nlp.add_pipe("sentencizer", first=True)
    calls = []
    monkeypatch.setattr(nlp, "evaluate", lambda examples, **kwargs: calls.append(1) or evaluate(examples, **kwargs))
    nlp.meta["performance"] = dict.fromkeys(keys, 0.0)
    make(path=str(tmp_path / "dev.spacy"))(nlp)
    assert calls and nlp.meta["performance"]["ents_f"] > 0.0


def test_calibrate_callback_fits_on_dev_and_scores_the_saved_pipeline(tmp_path):
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    DocBin(docs=[eg.reference for eg in make_examples(nlp, HELD_OUT)]).to_disk(tmp_path / "dev.spacy")
    nlp.meta["performance"] = {"ents_f": 0.0, "ents_p": 0.0, "ents_r": 0.0, "crf_ner_loss": 5.0}
    make = registry.misc.get("spacy-cner.calibrate.v1")
    make(path=str(tmp_path / "dev.spacy"), threshold=False)(nlp)
    assert ner.cfg["temperature"] != 1.0 and ner.entity_threshold is None
    assert nlp.meta["performance"]["ents_f"] == 0.0  # decoding unchanged: nothing to rescore
    make(path=str(tmp_path / "dev.spacy"))(nlp)
    assert ner.entity_threshold is not None
    scores = nlp.evaluate(make_examples(nlp, HELD_OUT))
    assert nlp.meta["performance"] == {**{key: scores[key] for key in ("ents_f", "ents_p", "ents_r")}, "crf_ner_loss": 5.0}
    # The temperature-only callback of older configs fits no threshold.
    ner.cfg["fitted_threshold"] = None
    registry.misc.get("spacy-cner.fit_temperature.v1")(path=str(tmp_path / "dev.spacy"))(nlp)
    assert ner.entity_threshold is None



def test_calibrate_callback_fits_at_the_saves_that_are_kept(tmp_path, monkeypatch):
    """In spaCy's loop every evaluation saves model-last (update_meta makes a new
    meta["performance"] first); only a best-so-far checkpoint becomes model-best, and only the
    final save (no evaluation since) is the last model-last: the callback fits at those."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    DocBin(docs=[eg.reference for eg in make_examples(nlp, HELD_OUT)]).to_disk(tmp_path / "dev.spacy")
    decodings = []
    decode = decoding.decode  # the pipe's predict and the calibrator both decode through it
    monkeypatch.setattr(decoding, "decode", lambda model, docs, *args, **kwargs: decodings.append(len(docs))
                        or decode(model, docs, *args, **kwargs))
    callback = registry.misc.get("spacy-cner.calibrate.v1")(path=str(tmp_path / "dev.spacy"))

    def save(ents_f=None):
        ner.cfg["temperature"], ner.cfg["fitted_threshold"] = 1.0, None  # as training leaves them
        if ents_f is not None:  # an evaluation before the save
            nlp.meta["performance"] = {"ents_f": ents_f, "ents_p": 0.0, "ents_r": 0.0, "crf_ner_loss": 3.0}
        decodings.clear()
        callback(nlp)
        return ner.entity_threshold is not None

    assert save(0.5)  # the first checkpoint is the best so far
    # Both fits and the scores of the fitted pipeline share one decoding of dev.
    assert decodings == [len(HELD_OUT)]
    assert ner.cfg["temperature"] != 1.0
    assert not save(0.4) and decodings == [] and ner.cfg["temperature"] == 1.0
    assert save(0.5)  # a tie is a new best for spaCy's loop too (the later step wins)
    assert not save(0.3)
    assert save()  # no evaluation since the last save: the save after training
    assert save(0.6)
    # Outside a training loop (no scores in meta): always.
    nlp.meta["performance"] = {}
    assert registry.misc.get("spacy-cner.calibrate.v1")(path=str(tmp_path / "dev.spacy"))(nlp) is nlp
    assert ner.entity_threshold is not None


# ---------------------------------------------------------------------------
# Labels after initialize


def test_add_label_after_training_keeps_the_learned_weights(tmp_path):
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    old_tags = ner.tag_names
    output = ner.model.get_ref("output_layer")
    W, b = output.get_param("W").copy(), output.get_param("b").copy()
    crf = torch_module(ner.model.get_ref("crf"))
    with torch.no_grad(), torch.nn.utils.parametrize.cached():
        transitions = crf.transitions.detach().numpy().copy()
    assert ner.add_label("TIME") == 1
    new_tags = ner.tag_names
    assert len(new_tags) > len(old_tags) and ner.model.get_dim("nO") == len(new_tags)
    rows = [new_tags.index(tag) for tag in old_tags]
    output = ner.model.get_ref("output_layer")  # a larger layer in place of the old one
    assert output.get_param("W").shape == (len(new_tags), W.shape[1])
    assert_allclose(output.get_param("W")[rows], W)
    assert_allclose(output.get_param("b")[rows], b)
    new_rows = [i for i, tag in enumerate(new_tags) if tag.endswith("-TIME")]
    assert (output.get_param("W")[new_rows] == 0).all()
    crf = torch_module(ner.model.get_ref("crf"))
    assert crf.tag_names == new_tags
    with torch.no_grad(), torch.nn.utils.parametrize.cached():
        assert_allclose(crf.transitions.detach().numpy()[numpy.ix_(rows, rows)], transitions)
    assert [(e.text, e.label_) for e in nlp("我在北京市工作").ents] == [("北京市", "LOC")]
    # Train the new label on, with a fresh optimizer; save and load.
    data = TRAIN_DATA + [("明天张三去上海", [(0, 2, "TIME"), (2, 4, "PER"), (5, 7, "LOC")])]
    optimizer = nlp.resume_training()
    for _ in range(60):
        nlp.update(make_examples(nlp, data), sgd=optimizer)
    assert nlp.evaluate(make_examples(nlp, data))["ents_f"] == 1.0
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert predictions(loaded.pipe(TEXTS)) == predictions(nlp.pipe(TEXTS))


def test_unknown_gold_labels_warn_once_with_counts():
    nlp = load_trained()
    examples = make_examples(nlp, TRAIN_DATA + [("明天张三去上海", [(0, 2, "TIME"), (2, 4, "PER")])] * 2)
    optimizer = nlp.resume_training()
    with pytest.warns(UserWarning, match=r"TIME \(2\)"):
        nlp.update(examples, sgd=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.update(examples, sgd=optimizer)


# ---------------------------------------------------------------------------
# A character model in a word-segmented pipeline


def word_pipeline(segmenter: str, **settings) -> spacy.Language:
    """The trained character pipeline's crf_ner in a pipeline with another segmenter."""
    trained = load_trained()
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.zh.ChineseTokenizer", "segmenter": segmenter}}})
    nlp.add_pipe("crf_ner", source=trained)
    ner = nlp.get_pipe("crf_ner")
    for key, value in settings.items():
        setattr(ner, key, value)
    return nlp


def test_a_character_model_tags_jieba_docs_on_their_characters():
    pytest.importorskip("jieba", reason="needs jieba (the test extra installs it)")
    chars = load_trained()
    nlp = word_pipeline("jieba")
    assert nlp.get_pipe("crf_ner").cfg["token_unit"] == "char"
    text = "张三去了上海，李四是阿里巴巴的员工"
    doc = nlp(text)
    assert any(len(token) > 1 for token in doc)  # jieba's words
    found = [(e.start_char, e.end_char, e.label_) for e in chars(text).ents]
    assert len(found) >= 3
    # The character model's entities, grown to the words they touch ("expand").
    expected = [(s.start_char, s.end_char, label) for s, label in
                ((doc.char_span(start, end, alignment_mode="expand"), label) for start, end, label in found)]
    assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == expected
    assert sum(e == f for e, f in zip(expected, found)) >= 2  # most lie on jieba's word boundaries
    group = doc.spans["crf_ner"]
    assert {(s.start_char, s.end_char, s.label_) for s in group} >= set(expected)


def test_entities_inside_a_word_follow_the_alignment_mode():
    pytest.importorskip("jieba", reason="needs jieba (the test extra installs it)")
    text = "我在北京市工作"
    chars = load_trained()
    assert [(e.text, e.label_) for e in chars(text).ents] == [("北京市", "LOC")]
    nlp = word_pipeline("jieba")
    # Words that cut the entity: 我在北 | 京市工作 (a pre-tokenized doc).
    doc = Doc(nlp.vocab, words=["我在北", "京市工作"], spaces=[False, False])
    expanded = nlp.get_pipe("crf_ner")(doc)
    assert [(e.text, e.label_) for e in expanded.ents] == [("我在北京市工作", "LOC")]
    nlp.get_pipe("crf_ner").alignment_mode = "strict"
    with pytest.warns(UserWarning, match="1 entities"):
        strict = nlp.get_pipe("crf_ner")(Doc(nlp.vocab, words=["我在北", "京市工作"], spaces=[False, False]))
    assert list(strict.ents) == []
    with pytest.raises(ValueError, match="alignment_mode"):
        spacy.blank("zh").add_pipe("crf_ner", config={"alignment_mode": "exact"})



def test_a_character_model_tags_pkuseg_docs_on_their_characters(tmp_path):
    pkuseg = pytest.importorskip("spacy_pkuseg", reason="needs spacy-pkuseg (the test extra installs it)")
    # A pkuseg model trained here on segmented sentences (its published models need a download).
    segmented = "张三 去了 上海\n李四 是 阿里巴巴 的 员工\n我 在 北京市 工作\n王五 住 在 广州\n"
    (tmp_path / "train.txt").write_text(segmented * 60, encoding="utf8")
    (tmp_path / "test.txt").write_text(segmented, encoding="utf8")
    pkuseg.train(str(tmp_path / "train.txt"), str(tmp_path / "test.txt"), str(tmp_path / "pkuseg"), train_iter=5)
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.zh.ChineseTokenizer", "segmenter": "pkuseg"}}})
    nlp.tokenizer.initialize(pkuseg_model=str(tmp_path / "pkuseg"))
    nlp.add_pipe("crf_ner", source=load_trained())
    text = "李四是阿里巴巴的员工"
    doc = nlp(text)
    assert "阿里巴巴" in [t.text for t in doc]  # pkuseg's words
    expected = [(e.start_char, e.end_char, e.label_) for e in load_trained()(text).ents]
    assert expected and [(e.start_char, e.end_char, e.label_) for e in doc.ents] == expected


def test_add_label_then_resume_training_goes_on_with_the_same_optimizer():
    """As with spaCy's `ner`: after add_label, nlp.resume_training() returns the optimizer that trained
    the pipe, and it goes on training (the resized output layer and CRF get fresh moments, not the old
    shapes: "arrays have incompatible shapes")."""
    fix_random_seed(0)
    nlp = make_nlp()
    optimizer = nlp.initialize(get_examples=lambda: make_examples(nlp))
    for _ in range(5):
        nlp.update(make_examples(nlp), sgd=optimizer)
    nlp.get_pipe("crf_ner").add_label("TIME")
    assert nlp.resume_training() is optimizer
    data = TRAIN_DATA + [("明天张三去上海", [(0, 2, "TIME"), (2, 4, "PER"), (5, 7, "LOC")])]
    for _ in range(60):
        nlp.update(make_examples(nlp, data), sgd=optimizer)
    assert nlp.evaluate(make_examples(nlp, data))["ents_f"] == 1.0


@pytest.mark.parametrize("edit", [{"temperature": "hot"}, {"temperature": float("nan")}, {"temperature": 0},
                                  {"fitted_threshold": 2.0}, {"fitted_threshold": -0.1}, {"fitted_threshold": True}])
def test_cfg_with_an_impossible_calibration_is_refused(edit, tmp_path):
    nlp = load_trained("BIOES")
    nlp.to_disk(tmp_path)
    cfg_path = tmp_path / "crf_ner" / "cfg"
    cfg = {**srsly.read_json(cfg_path), **edit}
    cfg_path.write_text(json.dumps(cfg), encoding="utf8")  # json writes NaN, as a hand edit could
    key = next(iter(edit))
    refusal = "is not valid JSON" if edit[key] != edit[key] else key  # srsly reads no NaN: the file is named
    with pytest.raises(ValueError, match=f"{cfg_path}.*{refusal}"):
        spacy.load(tmp_path)
    srsly.write_json(cfg_path, {**cfg, key: None})  # null: not fitted, loads
    spacy.load(tmp_path)


def test_loading_into_an_already_loaded_pipeline():
    """from_bytes into a pipeline that already has its weights (the CRF's masks registered) works."""
    nlp = load_trained()
    expected = predictions(nlp.pipe(TEXTS))
    nlp.from_bytes(nlp.to_bytes())
    assert predictions(nlp.pipe(TEXTS)) == expected
