"""Calibration of the `crf_ner` pipe's entity probabilities: a temperature and a decoding threshold
fitted on dev, and the [training.before_to_disk] callback that fits them when the pipeline is saved.

The fits are functions of `outcomes` (temperature -> each predicted entity's probability and whether
it is right), computed here from one decoding of dev by the pipe's model (decode_dev, through
decoding.py: data in, data out); nothing here imports the pipe or calls back into it but through its
public contract (set_annotations, score, and the fits that keep their results in its cfg).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

import numpy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Corpus, Example, validate_examples
from spacy.util import registry
from thinc.api import Model
from wasabi import msg

from ..long_docs import Decoded
from ..tags import TagSet
from ..tokenizer import character_copy
from ..training.reliability import expected_calibration_error
from .decoding import Tagging, decode_in_precision, span_scores, tag_docs

# temperature -> (probability of each predicted entity, 1.0 where it is right else 0.0)
Outcomes = Callable[[float], Tuple[numpy.ndarray, numpy.ndarray]]


@dataclass
class DevDecoding:
    """One decoding of dev by a pipe's model (decode_dev), for both fits and the scores after them."""

    examples: List[Example]
    # Copies of the examples' predicted docs, as decoded.
    docs: List[Doc]
    decoded: Decoded
    # Per doc, its gold entities as token spans of the predicted doc.
    gold: List[Set[Tuple[int, int, str]]]
    # False where a doc would be tagged on its character copy: the decoding does not stand for the pipe's tagging then.
    as_tagged: bool


# The ents_threshold settings a calibration decodes by (calibrate_pipeline).
DECODINGS = ("fitted", "auto")


@registry.misc("spacy-cner.calibrate.v1")
def make_calibrator(
    path: Optional[str], temperature: bool = True, threshold: bool = True
) -> Callable[[Language], Language]:
    """A [training.before_to_disk] callback: before each save of the pipeline, every crf_ner
    pipe fits, on the examples at path (the dev corpus, e.g. ${paths.dev}), the temperature of
    its entity probabilities (fit_temperature) and then the threshold its doc.ents are decoded
    at (fit_threshold, used with ents_threshold "fitted"), and whether that threshold beats the best
    path on dev (choose_decoding, used with ents_threshold "auto"), all kept in its cfg. With a fitted
    threshold, the pipeline's meta["performance"] gets the entity scores on path that the saved
    pipeline has (the training log shows those of the best path, which model-best is chosen on).

    spaCy's loop saves model-last after every evaluation and copies it to model-best when its
    score is the best so far; a fit (a few passes over dev) is only kept by model-best and by
    the last save. So in a training loop the callback fits at a save whose checkpoint scores at
    least as well as every earlier one (score_weights over meta["performance"], as the loop
    ranks them) and at the final save (no evaluation since the previous call), and leaves the
    other saves of model-last as they are: the best path, the last fitted temperature. It fits
    neither weights never updated since initialize (the loop's checkpoint at step 0) nor the weights
    it fitted last (the final save right after an evaluation's). Outside a training loop it fits
    at every call on new weights.

    path (Optional[str]): A .spacy file or folder of them; None fits nothing.
    temperature (bool): Fit the temperature.
    threshold (bool): Fit the threshold.
    RETURNS (Callable[[Language], Language]): The callback.
    """

    checkpoints = Checkpoints()

    def fit_before_saving(nlp: Language) -> Language:
        if path is None or not (temperature or threshold) or not checkpoints.worth_fitting(nlp):
            return nlp
        # crf_ner pipes (and their subclasses): the pipes that fit themselves.
        pipes = [(name, pipe) for name, pipe in nlp.pipeline if callable(getattr(pipe, "fit_temperature", None))]
        pipes = [(name, pipe) for name, pipe in pipes if checkpoints.worth_fitting_pipe(pipe)]
        if not pipes:
            return nlp
        examples = list(Corpus(path)(nlp))
        fitted = False
        decodings = {}
        for name, pipe in pipes:
            # One decoding of dev for both fits (and the scores after them).
            decodings[name] = decode_dev(
                pipe.model,
                pipe.tag_set,
                examples,
                pipe.long_doc_window,
                pipe.precision,
                pipe.name,
                pipe.cfg.get("token_unit"),
            )
            outcomes = dev_outcomes(pipe.model, pipe.tag_set, decodings[name])
            if temperature:
                fit = pipe.fit_temperature(examples, outcomes=outcomes)
                msg.info(
                    f"{name}: temperature {fit['temperature']:.3g} on {fit['n_entities']} predicted dev entities "
                    f"(ECE {fit['ece_before']:.3f} -> {fit['ece_after']:.3f})"
                )
            if threshold:
                fit = pipe.fit_threshold(examples, outcomes=outcomes)
                msg.info(f"{name}: entity threshold {fit['threshold']:.3g} (best-path dev F1 {fit['f1'] * 100:.2f})")
                fitted = fitted or pipe.ents_threshold in ("fitted", "auto")
        # Per pipe, the pipeline's dev scores at the threshold (True) and at the best path (False).
        choices = {
            name: choose_decoding(nlp, pipe, examples, decodings)
            for name, pipe in nlp.pipeline
            if threshold and name in decodings
        }
        if fitted:
            performance = nlp.meta.setdefault("performance", {})
            if len(choices) == 1:  # those scores hold for the pipeline as it is now
                name, scores_by_choice = next(iter(choices.items()))
                scores = scores_by_choice[nlp.get_pipe(name).entity_threshold is not None]
            else:  # a later pipe's choice changes the docs an earlier one's scores came from
                scores = scores_after_fit(nlp, examples, decodings)
            performance.update({key: scores[key] for key in performance if key.startswith("ents_") and key in scores})
        return nlp

    return fit_before_saving


def calibrate_pipeline(nlp: Language, dev: Union[str, Path], decoding: str = "fitted") -> Dict[str, Any]:
    """Fit every crf_ner pipe of a trained pipeline on dev (spacy-cner.calibrate.v1, the configs' own
    callback: the temperature, the threshold and, with "auto", the choice between it and the best path)
    and set its ents_threshold to decoding. For pipelines trained without the callback, or calibrated
    before "auto" existed (`python -m spacy_cner calibrate`; save_calibrated writes the result).

    nlp (Language): The pipeline, with at least one crf_ner pipe.
    dev (Union[str, Path]): The dev split (a .spacy file or folder of them).
    decoding (str): The pipes' ents_threshold after the fit: "fitted" or "auto".
    RETURNS (Dict[str, Any]): The pipeline's dev F1 at the best path ("best_path_f") and at the fitted
        thresholds ("threshold_f"), and per pipe ("pipes") its temperature, threshold and whether it
        decodes at the threshold.
    """
    if decoding not in DECODINGS:
        raise ValueError(f"decoding {decoding!r}: one of {', '.join(DECODINGS)}")
    pipes = [pipe for _, pipe in nlp.pipeline if callable(getattr(pipe, "fit_temperature", None))]
    if not pipes:
        raise ValueError(f"The pipeline ({', '.join(nlp.pipe_names) or 'no pipes'}) has no crf_ner pipe to calibrate.")
    examples = list(Corpus(str(dev))(nlp))
    if not examples:
        raise ValueError(f"{dev} holds no docs to calibrate on.")

    def set_decoding(value: Optional[str]) -> None:
        for pipe in pipes:
            pipe.ents_threshold = value

    set_decoding(None)
    best_path = nlp.evaluate(examples)["ents_f"]
    set_decoding(decoding)
    make_calibrator(str(dev))(nlp)
    set_decoding("fitted")
    at_threshold = nlp.evaluate(examples)["ents_f"]
    set_decoding(decoding)
    return {
        "best_path_f": best_path,
        "threshold_f": at_threshold,
        "pipes": {
            pipe.name: {
                "temperature": pipe.cfg["temperature"],
                "threshold": pipe.cfg["fitted_threshold"],
                "decodes_at_threshold": pipe.entity_threshold is not None,
            }
            for pipe in pipes
        },
    }


def save_calibrated(nlp: Language, output: Union[str, Path]) -> None:
    """nlp.to_disk(output), with each crf_ner pipe's ents_threshold (as calibrate_pipeline set it) in the
    saved config.cfg too, so that the saved pipeline loads decoding that way (nlp.config holds the
    settings the pipes were made with)."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)  # out/calibrated with no out/ yet: spaCy's to_disk makes one level
    nlp.to_disk(output)
    config = nlp.config.copy()
    for name, pipe in nlp.pipeline:
        if callable(getattr(pipe, "fit_temperature", None)):
            config["components"][name]["ents_threshold"] = pipe.ents_threshold
    config.to_disk(output / "config.cfg")


def choose_decoding(
    nlp: Language, pipe: Any, examples: List[Example], decodings: Dict[str, DevDecoding]
) -> Dict[bool, Dict[str, Any]]:
    """After a pipe's fits: whether its doc.ents score a higher dev F1 (the pipeline's ents_f) at the
    fitted threshold than at the best path, which is faster (no forward-backward) and wins ties; kept in
    cfg["threshold_chosen"], which ents_threshold "auto" decodes by. Chosen whatever the pipe's
    ents_threshold, so that a pipeline trained with another loads with "auto" as well.
    Why a choice: the threshold raised the test F1 of most distilled students but lowered some; dev
    picked the decoding that was better on test for 15 of 21 (docs/distillation.md).

    RETURNS (Dict[bool, Dict[str, Any]]): The pipeline's scores on the examples at the threshold (True) and
        at the best path (False).
    """
    setting, scores = pipe.ents_threshold, {}
    pipe.ents_threshold = "auto"
    try:
        for chosen in (True, False):
            pipe.cfg["threshold_chosen"] = chosen
            scores[chosen] = scores_after_fit(nlp, examples, decodings)
    finally:
        pipe.ents_threshold = setting
    f1 = {chosen: scores[chosen]["ents_f"] for chosen in scores}
    chosen = pipe.cfg.get("fitted_threshold") is not None and f1[True] > f1[False]
    pipe.cfg["threshold_chosen"] = chosen
    msg.info(
        f"{pipe.name}: dev F1 {f1[True] * 100:.2f} at the threshold, {f1[False] * 100:.2f} at the best path "
        f'(ents_threshold "auto" decodes at the {"threshold" if chosen else "best path"})'
    )
    return scores


def scores_after_fit(nlp: Language, examples: List[Example], decodings: Dict[str, DevDecoding]) -> Dict[str, Any]:
    """nlp.evaluate(examples)'s scores after the fits. Where the pipeline is one fitted pipe whose
    decoding stands for its tagging, they come from that decoding: the pipe's scorer on the docs it
    tags from it at the fitted settings (dev_tagging), without running the pipeline over dev a second
    time (its emissions do not depend on the batch: the same entities as nlp.evaluate's, tested). On
    a large dev set that pass is a good part of each fit, and a training fits at every save."""
    if len(nlp.pipeline) == 1:
        name, pipe = nlp.pipeline[0]
        decoding = decodings.get(name)
        if decoding is not None and decoding.as_tagged:
            candidate_threshold = pipe.candidate_threshold if pipe.spans_key is not None else None
            docs, tagging = dev_tagging(
                pipe.model,
                pipe.tag_set,
                decoding,
                pipe.entity_threshold,
                candidate_threshold,
                pipe.cfg.get("temperature", 1.0),
            )
            pipe.set_annotations(docs, tagging)
            return pipe.score([Example(doc, eg.reference) for doc, eg in zip(docs, decoding.examples)])
    return nlp.evaluate(examples)


def decode_dev(
    model: Model,
    tag_set: TagSet,
    examples: List[Example],
    long_doc_window: int,
    precision: str,
    name: str,
    token_unit: Optional[str],
) -> DevDecoding:
    """One decoding of the examples' predicted docs (copies) by a crf_ner model, as its pipe decodes them
    (decoding.decode_in_precision: its window and precision, the best paths), with their gold entities.

    model (Model): The pipe's model, with a "crf" ref.
    tag_set (TagSet): The CRF's tags.
    examples (List[Example]): Held-out gold examples (dev).
    long_doc_window (int): The pipe's long_doc_window.
    precision (str): The pipe's precision.
    name (str): The pipe's name, for its warnings.
    token_unit (Optional[str]): The pipe's cfg["token_unit"] ("char": a doc of longer tokens is tagged on its
        character copy, which this decoding then does not stand for).
    RETURNS (DevDecoding): The decoding.
    """
    examples = list(examples)
    validate_examples(examples, "calibration.decode_dev")
    docs = [eg.predicted.copy() for eg in examples]
    decoded = decode_in_precision(model, docs, tag_set, long_doc_window, precision, name)
    gold = [{(e.start, e.end, e.label_) for e in eg.get_aligned_spans_y2x(eg.reference.ents)} for eg in examples]
    on_characters = token_unit == "char" and any(character_copy(doc) is not None for doc in docs)
    return DevDecoding(examples, docs, decoded, gold, not on_characters)


def dev_outcomes(model: Model, tag_set: TagSet, decoding: DevDecoding) -> Outcomes:
    """The outcomes of a decoding of dev: at a temperature, each best-path entity's probability
    (decoding.span_scores) and whether it is a gold entity (entity_outcomes)."""
    n_docs = len(decoding.docs)
    return entity_outcomes(
        lambda t: span_scores(model, tag_set, n_docs, decoding.decoded, float("inf"), t), decoding.gold
    )


def dev_tagging(
    model: Model,
    tag_set: TagSet,
    decoding: DevDecoding,
    ents_threshold: Optional[float],
    candidate_threshold: Optional[float],
    temperature: float,
) -> Tuple[List[Doc], Tagging]:
    """New copies of the decoded dev docs and the Tagging the pipe's predict gives them at these settings
    (decoding.tag_docs), from the same decoding: for the pipe's set_annotations."""
    docs = [doc.copy() for doc in decoding.docs]
    tagging, _ = tag_docs(
        model, tag_set, docs, decoding.decoded, [None] * len(docs), ents_threshold, candidate_threshold, temperature
    )
    return docs, tagging


class Checkpoints:
    """Which saves of spaCy's training loop the calibrator fits at (make_calibrator)."""

    def __init__(self) -> None:
        self.best: Optional[float] = None
        self.performance: Optional[Dict[str, Any]] = None
        # Per pipe, the weights_version its last fit was on.
        self.fitted: Dict[str, int] = {}

    def worth_fitting_pipe(self, pipe: Any) -> bool:
        """False for weights never updated since initialize (spaCy's checkpoint at step 0: the first
        update drops the fit) and for the weights this callback last fitted (the save after training
        when the last evaluation saved them): the fit in the pipe's cfg is then current."""
        version = getattr(pipe, "weights_version", None)
        if getattr(pipe, "untrained", False) or (version is not None and self.fitted.get(pipe.name) == version):
            return False
        if version is not None:
            self.fitted[pipe.name] = version
        return True

    def worth_fitting(self, nlp: Language) -> bool:
        """True outside a training loop, at the final save, and at a checkpoint that scores at
        least as well as every earlier one: the saves whose fit is kept (model-best, model-last)."""
        performance = nlp.meta.get("performance")
        # The loop's update_meta makes a new dict at every evaluation: the same one means none
        # since the previous save, i.e. the save after training (or a second call).
        if performance is self.performance:
            return True
        self.performance = performance
        weights = {key: w for key, w in nlp.config.get("training", {}).get("score_weights", {}).items() if w}
        if not performance or not any(key in performance for key in weights):
            return True
        score = sum(float(performance.get(key, 0.0)) * w for key, w in weights.items())
        if self.best is not None and score < self.best:
            return False
        self.best = score
        return True


@registry.misc("spacy-cner.fit_temperature.v1")
def make_temperature_fitter(path: Optional[str]) -> Callable[[Language], Language]:
    """spacy-cner.calibrate.v1 with the temperature only (configs written before the threshold).

    path (Optional[str]): A .spacy file or folder of them; None fits nothing.
    RETURNS (Callable[[Language], Language]): The callback.
    """
    return make_calibrator(path, temperature=True, threshold=False)


def fit_temperature(outcomes: Outcomes) -> Dict[str, float]:
    """The temperature from 1/4 to 4 under which the probabilities of the predicted entities
    best predict whether each is right (an exact match of a gold entity): the least binary
    log loss, on a log grid of 9 and then of 9 between the best one's neighbours (steps of
    9%; 15 forward-backward passes over the examples where one grid that fine takes 33: it
    runs before each save in training).

    outcomes (Outcomes): temperature -> (probabilities, right) of the predicted entities.
    RETURNS (Dict[str, float]): temperature (1 when no entity is predicted), n_entities (the
        predicted entities it was fitted on), and log_loss / ece (10 bins) at temperature 1
        and at the fitted one.
    """
    seen: Dict[float, Tuple[numpy.ndarray, numpy.ndarray]] = {}

    def at(temperature: float) -> Tuple[numpy.ndarray, numpy.ndarray]:
        temperature = round(float(temperature), 4)  # as the saved cfg keeps it
        if temperature not in seen:
            seen[temperature] = outcomes(temperature)
        return seen[temperature]

    if len(at(1.0)[0]):
        coarse = numpy.linspace(numpy.log(0.25), numpy.log(4.0), 9)  # 1 is the middle one
        i = int(numpy.argmin([log_loss(*at(numpy.exp(x))) for x in coarse]))
        fine = numpy.exp(numpy.linspace(coarse[max(i - 1, 0)], coarse[min(i + 1, 8)], 9))
        best = min((round(float(t), 4) for t in fine), key=lambda t: log_loss(*at(t)))
    else:
        best = 1.0  # no predicted entity to fit on (e.g. a model that has not learnt yet)
    before, after = at(1.0), at(best)
    return {
        "temperature": best,
        "n_entities": len(before[0]),
        "log_loss_before": log_loss(*before),
        "log_loss_after": log_loss(*after),
        "ece_before": expected_calibration_error(*before),
        "ece_after": expected_calibration_error(*after),
    }


def fit_threshold(right: numpy.ndarray, n_gold: int) -> Dict[str, float]:
    """The probability to decode doc.ents at: half the F1 of the best-path entities on held-out
    examples. For calibrated probabilities (fit_temperature first), the threshold that maximises
    F1 is half the best F1 (Lipton, Elkan and Naryanaswamy 2014, "Thresholding classifiers to
    maximize F1 score"). One number from dev, not a search over thresholds: stable on a dev set of
    a few hundred sentences. At least 0.1 (the default candidate_threshold), for an untrained model.

    right (numpy.ndarray): Per predicted entity, 1.0 where it is right (an exact match of a gold one).
    n_gold (int): The gold entities of the examples.
    RETURNS (Dict[str, float]): threshold (rounded as the saved cfg keeps it), and f1 of the best path.
    """
    f1 = 2 * float(right.sum()) / (len(right) + n_gold) if len(right) + n_gold else 0.0
    return {"threshold": round(max(0.1, f1 / 2), 4), "f1": f1}


def log_loss(probs: numpy.ndarray, right: numpy.ndarray) -> float:
    """The mean binary log loss of the probabilities (clipped to [1e-7, 1 - 1e-7]); 0 for none."""
    probs = numpy.clip(probs, 1e-7, 1 - 1e-7)
    return float(-(right * numpy.log(probs) + (1 - right) * numpy.log(1 - probs)).mean()) if len(probs) else 0.0


def entity_outcomes(
    scores_at: Callable[[float], List[Dict[Tuple[int, int, str], float]]], gold: List[Set[Tuple[int, int, str]]]
) -> Outcomes:
    """Outcomes from scored spans: at a temperature, each scored span's probability and whether it is
    one of its doc's gold entities.

    scores_at (Callable): temperature -> per doc, (start, end, label) -> probability (the pipe's
        decoded docs, scored at that temperature).
    gold (List[Set[Tuple[int, int, str]]]): Per doc, its gold entities as token spans.
    RETURNS (Outcomes): temperature -> (probabilities, right), float64.
    """

    def outcomes(temperature: float) -> Tuple[numpy.ndarray, numpy.ndarray]:
        pairs = [
            (p, span in doc_gold)
            for doc_scores, doc_gold in zip(scores_at(temperature), gold)
            for span, p in doc_scores.items()
        ]
        if not pairs:
            return numpy.zeros(0), numpy.zeros(0)
        probs, right = zip(*pairs)
        return numpy.asarray(probs, dtype="float64"), numpy.asarray(right, dtype="float64")

    return outcomes
