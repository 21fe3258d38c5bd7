"""`python -m spacy_cner calibrate`: a trained pipeline fitted on dev, saved as a copy that loads decoding as
--decoding says; the pipe's warning for an unchosen "auto" names the command, once, at load."""

import warnings

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_cner.cli import app
from toy_pipe import HELD_OUT, TEXTS, load_trained, make_examples, predictions

runner = CliRunner()


@pytest.fixture
def trained(tmp_path):
    """A trained pipeline on disk with a threshold fitted but no choice made (calibrated before "auto"), and
    a dev split."""
    nlp = load_trained()
    nlp.get_pipe("crf_ner").cfg.update({"fitted_threshold": 0.123, "threshold_chosen": None})
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in make_examples(nlp, HELD_OUT)]).to_disk(tmp_path / "dev.spacy")
    return tmp_path / "model", tmp_path / "dev.spacy"


def test_an_unchosen_auto_warns_once_at_load_naming_the_command(trained):
    model, _ = trained
    with pytest.warns(UserWarning, match="python -m spacy_cner calibrate MODEL dev.spacy OUTPUT --decoding auto"):
        nlp = spacy.load(model, config={"components": {"crf_ner": {"ents_threshold": "auto"}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(nlp.pipe(TEXTS))  # once: not again at decoding


@pytest.mark.parametrize("decoding", ["auto", "fitted"])
def test_calibrate_saves_a_copy_that_decodes_as_told(trained, tmp_path, decoding):
    model, dev = trained
    out = tmp_path / "out" / "calibrated"  # a folder whose parent does not exist yet
    result = runner.invoke(app, ["calibrate", str(model), str(dev), str(out), "--decoding", decoding])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "at the best path" in output and "the calibrated copy" in output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a choice is made: no warning at load
        copy = spacy.load(out)
    pipe = copy.get_pipe("crf_ner")
    assert pipe.ents_threshold == decoding and pipe.cfg["threshold_chosen"] is not None
    assert pipe.cfg["temperature"] != 1.0 and pipe.cfg["fitted_threshold"] != 0.123
    if decoding == "fitted":
        assert pipe.entity_threshold == pipe.cfg["fitted_threshold"]
    # The weights are MODEL's: at the best path the copy tags as MODEL does (its scores at its temperature).
    original = spacy.load(model)
    pipe.ents_threshold = original.get_pipe("crf_ner").ents_threshold = None

    def tagged(nlp):
        return [{key: doc[key] for key in ("ents", "iob", "types")} for doc in predictions(nlp.pipe(TEXTS))]

    assert tagged(copy) == tagged(original)


def test_calibrate_refuses_in_one_line(trained, tmp_path):
    model, dev = trained
    same = runner.invoke(app, ["calibrate", str(model), str(dev), str(model)])
    assert same.exit_code == 1 and "is MODEL itself" in " ".join(same.output.split())
    spacy.blank("zh").to_disk(tmp_path / "blank")
    blank = runner.invoke(app, ["calibrate", str(tmp_path / "blank"), str(dev), str(tmp_path / "out")])
    assert blank.exit_code == 1 and "no crf_ner pipe to calibrate" in " ".join(blank.output.split())
    assert "Traceback" not in same.output + blank.output
    wrong = runner.invoke(app, ["calibrate", str(model), str(dev), str(tmp_path / "out"), "--decoding", "best"])
    assert wrong.exit_code != 0
