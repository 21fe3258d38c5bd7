"""How well entity probabilities match how often the entities are right: the points of a reliability
diagram and the expected calibration error over them (Guo, Pleiss, Sun and Weinberger 2017, "On Calibration
of Modern Neural Networks", section 2). Pure functions of (probabilities, right): the calibration fits
(pipeline/calibration.py) report them and the training logger draws them (logger.py).
"""

from typing import Dict, List

import numpy


def expected_calibration_error(probs: numpy.ndarray, right: numpy.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error: over n_bins equal-width bins of probability, the share of
    the predictions in each bin times |their accuracy - their mean probability|, summed."""
    n_predicted = len(probs)
    return float(
        sum(
            b["count"] / n_predicted * abs(b["precision"] - b["mean_probability"])
            for b in reliability_bins(probs, right, n_bins)
        )
    )


def reliability_bins(probs: numpy.ndarray, right: numpy.ndarray, n_bins: int = 10) -> List[Dict[str, float]]:
    """The points of a reliability diagram: the predictions in n_bins equal-width bins of probability
    (1.0 in the last), and per non-empty bin their mean probability and the share of them that is right.

    probs (numpy.ndarray): Per predicted entity, its probability.
    right (numpy.ndarray): Per predicted entity, 1.0 where it is right.
    n_bins (int): Bins of width 1 / n_bins.
    RETURNS (List[Dict[str, float]]): lower, upper, count, mean_probability, precision; empty bins left out.
    """
    probs, right = numpy.asarray(probs, dtype="float64"), numpy.asarray(right, dtype="float64")
    bins = numpy.minimum((probs * n_bins).astype(int), n_bins - 1)
    points = []
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            points.append(
                {
                    "lower": b / n_bins,
                    "upper": (b + 1) / n_bins,
                    "count": int(inside.sum()),
                    "mean_probability": float(numpy.mean(probs[inside])),
                    "precision": float(numpy.mean(right[inside])),
                }
            )
    return points
