"""Calibration of crf_ner's entity probabilities (spacy_cner/pipeline/calibration.py): the temperature and
threshold fitted on dev, and the spacy-cner.calibrate.v1 callback."""

import numpy
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import registry
from thinc.api import SGD

from conftest import TRAIN_DATA, make_examples
from toy_pipe import HELD_OUT, TEXTS, load_trained, make_nlp, predictions, scored
from spacy_cner.pipeline import decoding
from spacy_cner.tags import most_probable_spans


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
    assert nlp.meta["performance"] == {
        **{key: scores[key] for key in ("ents_f", "ents_p", "ents_r")},
        "crf_ner_loss": 5.0,
    }
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
    monkeypatch.setattr(
        decoding,
        "decode",
        lambda model, docs, *args, **kwargs: decodings.append(len(docs)) or decode(model, docs, *args, **kwargs),
    )
    callback = registry.misc.get("spacy-cner.calibrate.v1")(path=str(tmp_path / "dev.spacy"))

    sgd = SGD(0.0)

    def save(ents_f=None):
        ner.finish_update(sgd)  # a training step (of learn rate 0): it drops the threshold
        ner.cfg["temperature"] = 1.0
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
    decodings.clear()
    callback(nlp)  # the final save right after the evaluation's: the same weights, fitted already
    assert decodings == [] and ner.entity_threshold is not None
    # Outside a training loop (no scores in meta): always.
    nlp.meta["performance"] = {}
    assert registry.misc.get("spacy-cner.calibrate.v1")(path=str(tmp_path / "dev.spacy"))(nlp) is nlp
    assert ner.entity_threshold is not None


def test_calibrate_callback_auto_decodes_at_the_threshold_only_where_it_beats_the_best_path_on_dev(tmp_path):
    """ents_threshold "auto": the callback compares the dev F1 at the fitted threshold with the best
    path's (nlp.evaluate's, each way) and keeps the higher, the best path on a tie; the pipeline's
    performance is the chosen decoding's, the choice is saved, and an update drops it."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    held_out = make_examples(nlp, HELD_OUT)
    DocBin(docs=[eg.reference for eg in held_out]).to_disk(tmp_path / "dev.spacy")
    make = registry.misc.get("spacy-cner.calibrate.v1")
    ner.ents_threshold = "auto"
    choices = {}
    # Probabilities sharpened (0.5) or flattened (3.0) by a set temperature: the threshold keeps
    # different entities, better or worse than the best path's on these examples; at the fitted
    # temperature (None) the same F1.
    ties = {}
    for temperature in (0.5, 3.0, None):
        ner.cfg["temperature"] = temperature or 1.0
        nlp.meta["performance"] = {"ents_f": 0.0, "ents_p": 0.0, "ents_r": 0.0}
        make(path=str(tmp_path / "dev.spacy"), temperature=temperature is None)(nlp)
        threshold = ner.cfg["fitted_threshold"]
        assert threshold is not None
        ner.ents_threshold = "fitted"
        at_threshold = nlp.evaluate(make_examples(nlp, HELD_OUT))
        ner.ents_threshold = None
        at_best_path = nlp.evaluate(make_examples(nlp, HELD_OUT))
        ner.ents_threshold = "auto"
        choices[temperature] = ner.cfg["threshold_chosen"]
        ties[temperature] = at_threshold["ents_f"] == at_best_path["ents_f"]
        assert choices[temperature] == (at_threshold["ents_f"] > at_best_path["ents_f"])
        assert ner.entity_threshold == (threshold if choices[temperature] else None)
        chosen = at_threshold if choices[temperature] else at_best_path
        assert nlp.meta["performance"] == {key: chosen[key] for key in ("ents_f", "ents_p", "ents_r")}
        assert nlp.evaluate(make_examples(nlp, HELD_OUT))["ents_f"] == chosen["ents_f"]
    # Both ways and a tie (the best path: the faster), else the test shows nothing.
    assert choices == {0.5: True, 3.0: False, None: False} and ties == {0.5: False, 3.0: False, None: True}
    ner.cfg["temperature"] = 0.5
    make(path=str(tmp_path / "dev.spacy"), temperature=False)(nlp)
    nlp.to_disk(tmp_path / "model")
    # (The config the toy pipe was made with says "fitted": the attribute set above is not in it.)
    loaded = spacy.load(tmp_path / "model", config={"components": {"crf_ner": {"ents_threshold": "auto"}}})
    assert loaded.get_pipe("crf_ner").entity_threshold == ner.entity_threshold is not None
    assert predictions(loaded.pipe(TEXTS)) == predictions(nlp.pipe(TEXTS))
    # The choice is made whatever the setting (a student trained with the best path loads with "auto").
    ner.ents_threshold, ner.cfg["threshold_chosen"] = None, None
    make(path=str(tmp_path / "dev.spacy"), temperature=False)(nlp)
    assert ner.entity_threshold is None and ner.cfg["threshold_chosen"] is True
    ner.ents_threshold = "auto"
    assert ner.entity_threshold == ner.cfg["fitted_threshold"]
    nlp.update(make_examples(nlp), sgd=nlp.resume_training())
    assert ner.entity_threshold is None and ner.cfg["threshold_chosen"] is None
    # A threshold fitted without a choice (a pipeline calibrated before "auto"): the best path, and a warning.
    ner.cfg["fitted_threshold"] = 0.4
    with pytest.warns(UserWarning, match="no choice between it and the best path"):
        assert ner.entity_threshold is None


def test_calibrate_callback_fits_no_untrained_weights(tmp_path, capsys):
    """spaCy's loop evaluates and saves at step 0, before any update: the callback fits nothing then
    (its fit would be dropped by the first update) and says nothing; after an update it fits."""
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("crf_ner")
    examples = make_examples(nlp, TRAIN_DATA)
    nlp.initialize(lambda: examples)
    DocBin(docs=[eg.reference for eg in make_examples(nlp, HELD_OUT)]).to_disk(tmp_path / "dev.spacy")
    callback = registry.misc.get("spacy-cner.calibrate.v1")(path=str(tmp_path / "dev.spacy"))
    nlp.meta["performance"] = {"ents_f": 0.0, "ents_p": 0.0, "ents_r": 0.0}
    capsys.readouterr()
    callback(nlp)
    assert capsys.readouterr().out == "" and ner.cfg["fitted_threshold"] is None
    nlp.update(examples, sgd=nlp.create_optimizer())
    nlp.meta["performance"] = {"ents_f": 0.1, "ents_p": 0.1, "ents_r": 0.1}
    callback(nlp)
    assert "temperature" in capsys.readouterr().out and ner.cfg["fitted_threshold"] is not None
