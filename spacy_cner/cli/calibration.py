"""`calibrate`: a trained pipeline's crf_ner pipes fitted on dev (temperature, threshold, decoding), saved as a copy."""

from pathlib import Path

import typer

from ..pipeline.calibration import DECODINGS
from ._app import _choices, app, msg
from .checks import check_output, load_pipeline, read_docbin

Decoding = _choices("Decoding", DECODINGS, "The ents_threshold `calibrate` gives its copy.")


@app.command("calibrate")
def calibrate_command(
    model: str = typer.Argument(..., help="A trained pipeline (name or path) with a crf_ner pipe."),
    dev: Path = typer.Argument(..., exists=True, dir_okay=False, help="The dev split (.spacy) to fit on."),
    output: Path = typer.Argument(..., help="Folder for the calibrated copy of the pipeline."),
    decoding: Decoding = typer.Option(
        Decoding("fitted"),
        "--decoding",
        help="The copy's ents_threshold: fitted decodes doc.ents at the fitted threshold, auto only where "
        "that scored a higher dev F1 than the best path.",
    ),
) -> None:
    """Fit a trained pipeline's entity probabilities on dev, as the configs' calibration callback
    (spacy-cner.calibrate.v1) does at each save: the temperature, the threshold doc.ents are decoded at,
    and with --decoding auto whether that beats the best path. For pipelines trained without the
    callback or before "auto" existed. The weights are unchanged; the copy in OUTPUT loads with its
    ents_threshold set to --decoding."""
    from ..pipeline.calibration import calibrate_pipeline, save_calibrated

    if Path(model).exists() and Path(model).resolve() == output.resolve():
        msg.fail(f"OUTPUT {output} is MODEL itself: give a new folder for the calibrated copy.", exits=1)
    check_output(output, folder=True)
    read_docbin(dev)  # one line naming the file where it is no .spacy file
    nlp = load_pipeline(model)
    try:
        fits = calibrate_pipeline(nlp, dev, decoding.value)
    except ValueError as err:
        msg.fail(f"{model}: {err}", exits=1)
    try:
        save_calibrated(nlp, output)
    except OSError as err:  # checked before the work; a disk that filled up since
        msg.fail(f"Cannot write {output}: {err}", exits=1)
    for name, fit in fits["pipes"].items():
        msg.info(
            f"{name}: temperature {fit['temperature']:.4g}, threshold {fit['threshold']:.4g}, decodes at the "
            f"{'threshold' if fit['decodes_at_threshold'] else 'best path'}"
        )
    msg.good(
        f"dev F1 {fits['best_path_f'] * 100:.2f} at the best path, {fits['threshold_f'] * 100:.2f} at the threshold; "
        f"the calibrated copy: {output}"
    )
