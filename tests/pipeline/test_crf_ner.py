"""The crf_ner pipe's contract: the checks spaCy runs on its own pipes (labels, initialize, update, get_loss
with missing annotation, save and load, nlp.pipe in batches and processes, entry points), plus CRF specifics.
The modules beside the pipe have their own files here (decoding, calibration, alignment, serialization); the
tiny pipe they share (32 wide, a few dozen steps on five sentences) is tests/toy_pipe.py; `spacy train` on
configs/default.cfg is in tests/integration/test_spacy_train.py.
"""

import json
import signal
import warnings
from importlib.metadata import entry_points

import numpy
import pytest
import spacy
import srsly
import torch
from numpy.testing import assert_allclose
from spacy.tokens import Span
from spacy.training import Example
from spacy.util import registry
from thinc.api import fix_random_seed

from conftest import TRAIN_DATA, make_examples
from toy_pipe import (
    LABELS,
    SMALL_MODEL,
    TEXTS,
    load_trained,
    make_nlp,
    pipe_config,
    predictions,
    run_python,
    train,
    trained_bytes,
)
from reference import all_paths, log_sum_paths
from spacy_cner.layers._torch import torch_module
from spacy_cner.pipeline.crf_ner import make_crf_ner
from spacy_cner.tags import SCHEMES


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
        assert [tuple(ent) for ent in ents_from_tokens] == [(ent.start, ent.end, ent.label_) for ent in doc.ents]
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
        pytest.fail(f"the subprocess gave no {key!r}, rc {result.returncode}{hung}:\n{result.stderr[-3000:]}")
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
