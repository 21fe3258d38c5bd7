"""spacy-cner.PlotLogger.v1: spaCy's console log plus a training curve and a calibration plot (data and
SVG) written into the training output folder; and the SVG charts and reliability bins it draws from."""

import io
import xml.etree.ElementTree as ElementTree

import numpy
import pytest
import spacy
import srsly
from spacy.training import Example
from spacy.util import load_config, registry

from conftest import REPO_ROOT, SMALL_CONFIG_OVERRIDES, TRAIN_DATA, make_examples, train_from_config, write_corpus
from spacy_cner.training.reliability import expected_calibration_error, reliability_bins
from spacy_cner.training.logger import plot_logger
from spacy_cner.training.plots import Panel, Series, nice_ticks, svg_picture

SVG = "{http://www.w3.org/2000/svg}"


def polylines(path):
    """The lines of an SVG file (parsing it checks it is well-formed XML)."""
    return ElementTree.parse(path).getroot().findall(f".//{SVG}polyline")


def test_spacy_train_writes_curve_and_calibration_beside_the_model(tmp_path):
    """The default config, trained by `spacy train` for 10 steps: the curve has one row per evaluation, the
    calibration plot is model-best's on dev (its saved temperature, the ECE its own outcomes give)."""
    overrides = {
        **write_corpus(tmp_path),
        **SMALL_CONFIG_OVERRIDES["default"],
        "training.max_steps": 10,
        "training.eval_frequency": 5,
    }
    output = train_from_config("default", tmp_path / "output", overrides)
    rows = list(srsly.read_jsonl(output / "training_curve.jsonl"))
    assert [row["step"] for row in rows] == [0, 5, 10]
    assert all(0.0 <= row["scores"]["ents_f"] <= 1.0 and row["losses"]["crf_ner"] > 0 for row in rows)
    assert all(row["score"] == row["scores"]["ents_f"] for row in rows)  # score_weights: ents_f 1.0
    # Dev scores (ents_f, ents_p, ents_r) and the losses (crf_ner and its adversarial term).
    assert len(polylines(output / "training_curve.svg")) == 3 + len(rows[0]["losses"])

    calibration = srsly.read_json(output / "calibration.json")
    assert calibration["model"] == "model-best" and calibration["n_examples"] == 3
    nlp = spacy.load(output / "model-best")
    ner = nlp.get_pipe("crf_ner")
    pipe = calibration["pipes"]["crf_ner"]
    assert pipe["temperature"] == ner.cfg["temperature"]
    dev = [Example(nlp.make_doc(eg.text), eg.reference) for eg in make_examples(nlp, TRAIN_DATA[:3])]
    probs, right = ner.entity_outcomes(dev)(ner.cfg["temperature"])
    assert pipe["n_entities"] == len(probs) == sum(b["count"] for b in pipe["bins"]) > 0
    assert pipe["ece"] == pytest.approx(expected_calibration_error(probs, right))
    assert pipe["precision"] == pytest.approx(right.mean())
    assert len(polylines(output / "calibration.svg")) == (2 if "bins_at_1" in pipe else 1)


def test_every_shipped_config_logs_with_pictures():
    for path in sorted((REPO_ROOT / "configs").glob("*.cfg")):
        section = load_config(path, interpolate=False)["training"]["logger"]
        assert section["@loggers"] == "spacy-cner.PlotLogger.v1", path.name
        assert callable(registry.resolve({"logger": section})["logger"]), path.name


def evaluation(step, output_path, f=0.5):
    return {
        "epoch": 0,
        "step": step,
        "score": f,
        "other_scores": {"ents_f": f, "ents_p": f, "ents_r": f, "ents_per_type": {}},
        "losses": {"crf_ner": 10.0 / (step + 1)},
        "checkpoints": [],
        "seconds": step,
        "words": 10 * step,
        "output_path": output_path,
    }


def setup(tmp_path, **settings):
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner")
    nlp.config["training"]["score_weights"] = {"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0}
    stdout = io.StringIO()
    log_step, finalize = plot_logger(**settings)(nlp, stdout, io.StringIO())
    return log_step, finalize, stdout


def test_curve_is_written_as_training_goes_and_only_with_an_output_folder(tmp_path):
    log_step, finalize, stdout = setup(tmp_path)
    model_last = str(tmp_path / "model-last")
    log_step(evaluation(0, None))  # `spacy train` without --output: nothing written
    assert not list(tmp_path.iterdir())
    log_step(evaluation(0, model_last, 0.2))
    log_step(None)  # a step without evaluation
    assert [row["step"] for row in srsly.read_jsonl(tmp_path / "training_curve.jsonl")] == [0]
    log_step(evaluation(5, model_last, 0.6))
    rows = list(srsly.read_jsonl(tmp_path / "training_curve.jsonl"))
    assert [row["step"] for row in rows] == [0, 5]
    assert [row["scores"]["ents_f"] for row in rows] == pytest.approx([0.2, 0.6])
    assert "ents_per_type" not in rows[0]["scores"]  # numbers only
    assert "model-best (60.0)" in (tmp_path / "training_curve.svg").read_text(encoding="utf8")
    # No model-best saved (a training loop saves one): no calibration plot, no error.
    finalize()
    assert not (tmp_path / "calibration.json").exists()
    assert "training_curve.svg" in stdout.getvalue()


def test_no_dev_pass_after_an_error_and_a_failing_plot_only_warns(tmp_path):
    log_step, finalize, stdout = setup(tmp_path)
    log_step(evaluation(0, str(tmp_path / "model-last")))
    (tmp_path / "model-best").mkdir()  # not a pipeline: loading it fails
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        finalize()  # as from the loop's `finally`
    assert "calibration" not in stdout.getvalue()
    finalize()
    assert "No calibration plot" in stdout.getvalue() and not (tmp_path / "calibration.json").exists()


def test_calibration_bins_is_checked():
    with pytest.raises(ValueError, match="calibration_bins"):
        plot_logger(calibration_bins=-1)


def test_reliability_bins_and_ece():
    probs, right = numpy.asarray([0.95, 0.95, 0.55, 0.15, 1.0]), numpy.asarray([1.0, 0.0, 1.0, 0.0, 1.0])
    bins = reliability_bins(probs, right)
    assert [(b["lower"], b["count"]) for b in bins] == [(0.1, 1), (0.5, 1), (0.9, 3)]  # 1.0 in the last bin
    assert bins[2]["mean_probability"] == pytest.approx(2.9 / 3) and bins[2]["precision"] == pytest.approx(2 / 3)
    assert expected_calibration_error(probs, right) == pytest.approx(
        0.2 * 0.15 + 0.2 * 0.45 + 0.6 * abs(2 / 3 - 2.9 / 3)
    )
    assert reliability_bins(numpy.zeros(0), numpy.zeros(0)) == [] and expected_calibration_error([], []) == 0.0


def test_nice_ticks_and_svg_picture(tmp_path):
    assert nice_ticks(0, 100) == [0, 25, 50, 75, 100]
    assert nice_ticks(0, 1) == [0, 0.25, 0.5, 0.75, 1]
    assert nice_ticks(3, 37) == [10, 20, 30]
    panels = [
        Panel("a <b>", "x", "y", [Series("s & t", [0, 1, 2], [1.0, float("nan"), 3.0])]),
        Panel("empty", "x", "y", [], diagonal=True, marker=(0.5, "best")),
    ]
    (tmp_path / "p.svg").write_text(svg_picture(panels), encoding="utf8")
    lines = polylines(tmp_path / "p.svg")
    assert len(lines) == 1 and len(lines[0].get("points").split()) == 2  # the NaN left out
    assert ElementTree.parse(tmp_path / "p.svg").getroot().get("width") == "840"


def test_the_curve_plots_the_loss_per_update_and_fits_the_score_axis(tmp_path):
    """Issue 81: spaCy's loop sums the losses from one evaluation to the next (1 update at step 0, then 200):
    plotted as given, a per-update loss falling 8x rose 25x. And dev F1 from 89.5 to 94.3 was a flat line on
    an axis of 0-100."""
    log_step, _, _ = setup(tmp_path)
    model_last = str(tmp_path / "model-last")
    for step, loss_sum, f in ((0, 8.0, 0.895), (200, 200.0, 0.93), (400, 200.0, 0.943)):
        info = evaluation(step, model_last, f)
        info["losses"] = {"crf_ner": loss_sum}
        log_step(info)
    rows = list(srsly.read_jsonl(tmp_path / "training_curve.jsonl"))
    assert [row["updates"] for row in rows] == [1, 200, 200]
    assert [row["loss_per_update"]["crf_ner"] for row in rows] == pytest.approx([8.0, 1.0, 1.0])
    assert [row["losses"]["crf_ner"] for row in rows] == [8.0, 200.0, 200.0]  # spaCy's sums, kept
    root = ElementTree.parse(tmp_path / "training_curve.svg").getroot()
    scores, loss = root.findall(f".//{SVG}g")
    ys = [float(point.split(",")[1]) for point in loss.findall(f"{SVG}polyline")[0].get("points").split()]
    assert ys[0] < ys[1] == ys[2]  # SVG's y grows downwards: the loss falls
    f_line = scores.findall(f"{SVG}polyline")[0]
    ys = [float(point.split(",")[1]) for point in f_line.get("points").split()]
    assert ys[0] - ys[2] > 0.6 * (300 - 30 - 64)  # 89.5 -> 94.3 spans most of the plot's height
    ticks = [float(t.text) for t in scores.findall(f"{SVG}text") if t.get("text-anchor") == "end" and not t.get("fill")]
    assert 88 <= min(ticks) and max(ticks) <= 96, ticks


@pytest.mark.parametrize("values", [[0.0011, 0.0026], [12000.0, 25000.0], [89.5, 94.3], [-0.5, 0.5]])
def test_no_label_is_drawn_over_the_tick_labels(tmp_path, values):
    """The y axis's title (rotated: its glyphs lie left of its baseline) clears the widest tick label."""
    from spacy_cner.training.plots import DIGIT_WIDTH, FONT_ASCENT, TICK_GAP, text_width

    svg = svg_picture([Panel("t", "step", "loss per update", [Series("s", [0, 1], values)])])
    root = ElementTree.fromstring(svg)
    title = next(text for text in root.iter(f"{SVG}text") if text.text == "loss per update")
    title_right = float(title.get("transform").split("(")[1].split(",")[0]) + 3  # the descent
    ticks = [text for text in root.iter(f"{SVG}text") if text.get("text-anchor") == "end" and not text.get("fill")]
    assert len(ticks) >= 2 and DIGIT_WIDTH > 0 and FONT_ASCENT > 0
    for tick in ticks:
        left_end = float(tick.get("x")) - text_width(tick.text)
        assert left_end > title_right, (tick.text, left_end, title_right)
        assert float(tick.get("x")) + TICK_GAP <= float(root.find(f".//{SVG}rect[@stroke='#444']").get("x"))
