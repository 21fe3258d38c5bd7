"""spacy-cner.PlotLogger.v1: spaCy's console log, and pictures of the training written beside the model.

spaCy's loop tells a logger where it saves only through each evaluation's info["output_path"]
(model-last, set when `spacy train` has --output); the files go in its parent, the training output
folder, beside model-best and model-last:

- training_curve.jsonl, one row per evaluation (epoch, step, seconds, words, the losses summed since the
  previous evaluation as spaCy's loop gives them, the updates they sum and their mean per update, every
  numeric dev score, the weighted score), and training_curve.svg from it (the loss per update: the sums
  cover one update at step 0 and eval_frequency after), both rewritten at each evaluation, so a training
  still running or stopped has them;
- calibration.json and calibration.svg at the end, for each pipe with entity probabilities
  (crf_ner): model-best's probabilities of its predicted dev entities against the share of them
  that is right, in bins (a reliability diagram), at the temperature the pipe saved and at 1.
"""

import sys
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, Union

import spacy
import srsly
from spacy.language import Language
from spacy.training.loggers import console_logger_v3
from spacy.util import registry, resolve_dot_names
from wasabi import Printer

from .reliability import expected_calibration_error, reliability_bins
from .plots import Panel, Series, fitted_range, svg_picture

CURVE_DATA, CURVE_PICTURE = "training_curve.jsonl", "training_curve.svg"
CALIBRATION_DATA, CALIBRATION_PICTURE = "calibration.json", "calibration.svg"
BEST_MODEL = "model-best"
LogStep = Callable[[Optional[Dict[str, Any]]], None]


@registry.loggers("spacy-cner.PlotLogger.v1")
def plot_logger(
    progress_bar: Optional[str] = None,
    console_output: bool = True,
    output_file: Optional[Union[str, Path]] = None,
    calibration_bins: int = 10,
) -> Callable[..., Tuple[LogStep, Callable[[], None]]]:
    """spacy.ConsoleLogger.v3 (its arguments, passed on), which also writes a training curve and a
    calibration plot, data and SVG, into the training output folder (nothing without --output).

    progress_bar (Optional[str]): ConsoleLogger.v3's: None, "train" or "eval".
    console_output (bool): ConsoleLogger.v3's: print the table of evaluations.
    output_file (Optional[Union[str, Path]]): ConsoleLogger.v3's: its JSONL log.
    calibration_bins (int): Bins of the calibration plot (width 1 / calibration_bins); 0 for no
        calibration plot (it costs loading model-best and tagging dev once, after training).
    RETURNS (Callable): The logger's setup, as spaCy's training loop calls it.
    """
    if calibration_bins < 0:
        raise ValueError(
            f"calibration_bins is the number of bins of the calibration plot, 0 for none; got "
            f"{calibration_bins}. Hint: 10 bins of width 0.1 suit a dev set of a few hundred entities."
        )
    console = console_logger_v3(progress_bar=progress_bar, console_output=console_output, output_file=output_file)

    def setup_logger(
        nlp: Language, stdout: IO = sys.stdout, stderr: IO = sys.stderr
    ) -> Tuple[LogStep, Callable[[], None]]:
        log_console, finalize_console = console(nlp, stdout, stderr)
        report = TrainingReport(nlp, calibration_bins, lambda line: print(line, file=stdout, flush=True))

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            log_console(info)
            if info is not None and info.get("output_path"):
                report.add_evaluation(info)

        def finalize() -> None:
            finalize_console()
            # Called from the loop's `finally`: after an error or Ctrl-C, no dev pass (the curve is written).
            if sys.exc_info()[0] is not None:
                return
            try:
                report.write_calibration()
            except Exception as error:  # noqa: BLE001
                # The loop saves model-last after this call: a failing picture must not cost the model.
                report.write(report.msg.warn(f"No calibration plot: {type(error).__name__}: {error}"))

        return log_step, finalize

    return setup_logger


class TrainingReport:
    """The files of spacy-cner.PlotLogger.v1 for one training of nlp."""

    def __init__(self, nlp: Language, calibration_bins: int, write: Callable[[str], None]) -> None:
        self.config = nlp.config
        training = nlp.config["training"]
        self.score_columns = [
            key for key, weight in training["score_weights"].items() if weight is not None and key != "speed"
        ]
        self.calibration_bins = calibration_bins
        self.write = write
        self.msg = Printer(no_print=True)
        self.rows: List[Dict[str, Any]] = []
        self.folder: Optional[Path] = None

    def add_evaluation(self, info: Dict[str, Any]) -> None:
        """Append the evaluation to the curve's data and redraw its picture."""
        folder = Path(info["output_path"]).parent
        if self.folder is None:
            self.folder = folder
            (folder / CURVE_DATA).write_text("", encoding="utf8")
            self.write(self.msg.info(f"Training curve: {folder / CURVE_PICTURE}"))
        scores = {
            key: float(value)
            for key, value in (info.get("other_scores") or {}).items()
            if isinstance(value, (int, float))
        }
        # spaCy's loop sums the losses from one evaluation to the next (step 0 follows the first update).
        updates = max(info["step"] - self.rows[-1]["step"] if self.rows else info["step"] + 1, 1)
        losses = {name: float(loss) for name, loss in info["losses"].items()}
        row = {
            "epoch": info["epoch"],
            "step": info["step"],
            "seconds": info.get("seconds"),
            "words": info.get("words"),
            "losses": losses,
            "updates": updates,
            "loss_per_update": {name: loss / updates for name, loss in losses.items()},
            "scores": scores,
            "score": float(info["score"]),
        }
        self.rows.append(row)
        with (folder / CURVE_DATA).open("a", encoding="utf8") as file:
            file.write(srsly.json_dumps(row) + "\n")
        (folder / CURVE_PICTURE).write_text(svg_picture(curve_panels(self.rows, self.score_columns)), encoding="utf8")

    def write_calibration(self) -> None:
        """model-best's calibration on dev, as data and picture; a line saying why where there is none."""
        if self.folder is None or not self.calibration_bins:
            return
        best = self.folder / BEST_MODEL
        if not best.is_dir():
            return
        nlp = spacy.load(best)
        pipes = [(name, pipe) for name, pipe in nlp.pipeline if callable(getattr(pipe, "entity_outcomes", None))]
        if not pipes:
            self.write(self.msg.info("No calibration plot: no pipe with entity probabilities (crf_ner)"))
            return
        config = self.config.interpolate()
        dev_corpus = resolve_dot_names(config, [config["training"]["dev_corpus"]])[0]
        examples = list(dev_corpus(nlp))
        data = {"model": BEST_MODEL, "n_examples": len(examples), "pipes": {}}
        for name, pipe in pipes:
            data["pipes"][name] = pipe_calibration(
                pipe.entity_outcomes(examples), pipe.cfg.get("temperature", 1.0), self.calibration_bins
            )
        srsly.write_json(self.folder / CALIBRATION_DATA, data)
        (self.folder / CALIBRATION_PICTURE).write_text(svg_picture(calibration_panels(data)), encoding="utf8")
        self.write(self.msg.good(f"Calibration plot of {BEST_MODEL} on dev: {self.folder / CALIBRATION_PICTURE}"))


def pipe_calibration(outcomes: Callable, temperature: float, n_bins: int) -> Dict[str, Any]:
    """A pipe's reliability bins and ECE at its temperature (what ent._.score gives) and at 1.

    outcomes (Callable): temperature -> (probabilities, right) of its predicted entities (entity_outcomes).
    temperature (float): The pipe's saved temperature.
    n_bins (int): Bins of width 1 / n_bins.
    RETURNS (Dict[str, Any]): temperature, n_entities, precision, ece and bins; ece_at_1 and
        bins_at_1 where the temperature is not 1.
    """
    probs, right = outcomes(temperature)
    result = {
        "temperature": temperature,
        "n_entities": len(probs),
        "precision": float(right.mean()) if len(right) else 0.0,
        "ece": expected_calibration_error(probs, right, n_bins),
        "bins": reliability_bins(probs, right, n_bins),
    }
    if temperature != 1.0:
        probs, right = outcomes(1.0)
        result["ece_at_1"] = expected_calibration_error(probs, right, n_bins)
        result["bins_at_1"] = reliability_bins(probs, right, n_bins)
    return result


def curve_panels(rows: List[Dict[str, Any]], score_columns: List[str]) -> List[Panel]:
    """Dev scores (in %, the axis fitted to them) and the loss per update, against the step, from the rows of
    training_curve.jsonl; a line at the best step (model-best, the latest of equal best scores, as spaCy's
    loop saves it)."""
    steps = [row["step"] for row in rows]
    best = max(rows, key=lambda row: (row["score"], row["step"]))
    marker = (best["step"], f"{BEST_MODEL} ({best['score'] * 100:.1f})")
    columns = [key for key in score_columns if any(key in row["scores"] for row in rows)]
    scores = [Series(key, steps, [row["scores"].get(key, float("nan")) * 100 for row in rows]) for key in columns]
    if not scores:
        scores = [Series("score", steps, [row["score"] * 100 for row in rows])]
    pipes = sorted({name for row in rows for name in row["losses"]})
    per_update = [_loss_per_update(rows, i) for i in range(len(rows))]
    losses = [Series(name, steps, [row.get(name, float("nan")) for row in per_update]) for name in pipes]
    score_range = fitted_range([y for series in scores for y in series.ys], bounds=(0.0, 100.0))
    return [
        Panel("Dev scores", "step", "%", scores, y_range=score_range, marker=marker),
        Panel("Training loss", "step", "loss per update", losses, marker=marker),
    ]


def _loss_per_update(rows: List[Dict[str, Any]], i: int) -> Dict[str, float]:
    """Row i's losses per update (rows written before "loss_per_update": from the steps)."""
    if "loss_per_update" in rows[i]:
        return rows[i]["loss_per_update"]
    updates = max(rows[i]["step"] - rows[i - 1]["step"] if i else rows[i]["step"] + 1, 1)
    return {name: loss / updates for name, loss in rows[i]["losses"].items()}


def calibration_panels(data: Dict[str, Any]) -> List[Panel]:
    """One reliability diagram per pipe of calibration.json: share right against mean probability per bin."""
    panels = []
    for name, pipe in data["pipes"].items():
        series = []
        for suffix, temperature, dashed in (("", pipe["temperature"], False), ("_at_1", 1.0, True)):
            bins = pipe.get(f"bins{suffix}")
            if bins is None:
                continue
            series.append(
                Series(
                    f"T = {temperature:.3g} (ECE {pipe['ece' + suffix]:.3f})",
                    [b["mean_probability"] for b in bins],
                    [b["precision"] for b in bins],
                    dashed=dashed,
                    labels=None if dashed else [str(b["count"]) for b in bins],
                )
            )
        title = f"{name}: {pipe['n_entities']} predicted dev entities ({data['model']})"
        panels.append(
            Panel(
                title,
                "entity probability (bin mean; numbers: entities)",
                "share right (precision)",
                series,
                x_range=(0.0, 1.0),
                y_range=(0.0, 1.0),
                diagonal=True,
            )
        )
    return panels
