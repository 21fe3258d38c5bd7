"""Checkpoint averaging: evaluate and save the mean of the last few checkpoints' weights.

Vaswani et al. (2017) average the last checkpoints of a training run; Izmailov et al. (2018,
stochastic weight averaging) find such means in flatter regions that generalise better. spaCy's
training loop evaluates and saves with `nlp.use_params(optimizer.averages)`, so an optimizer whose
`averages` hold that mean is all it takes. thinc's own `use_averages` keeps an exponential moving
average instead, whose window grows with the run (about the last ninth of its updates); this one
keeps a fixed window: the weights after every `every`-th update, the last `last` of them.
"""

from collections import deque
from typing import Any, Deque, Dict, Tuple, cast

from thinc.api import Optimizer, registry
from thinc.optimizers import ADAM_DEFAULTS, FloatOrSeq
from thinc.types import FloatsXd


class CheckpointAverage(Optimizer):
    """thinc's Adam (Optimizer) whose `averages` are the mean of the weights after the last
    `last` of every `every`-th update of each parameter.

    A parameter that has not reached its first checkpoint has no average (spaCy then evaluates
    its current weights). thinc's Optimizer would keep its moving average in the same `averages`
    dict: it is switched off around each step, so that only the checkpoint mean is written there.
    """

    def __init__(self, learn_rate: FloatOrSeq, *, every: int, last: int, **adam: Any) -> None:
        if every < 1 or last < 1:
            raise ValueError(f"Checkpoint averaging needs every >= 1 and last >= 1, got every={every}, last={last}.")
        super().__init__(learn_rate, use_averages=True, **adam)
        self._every = every
        self._last = last
        self._checkpoints: Dict[Tuple[int, str], Deque[FloatsXd]] = {}

    def __call__(self, key: Tuple[int, str], weights: FloatsXd, gradient: FloatsXd, *, lr_scale: float = 1.0):
        averages, self.averages = self.averages, None
        try:
            weights, gradient = super().__call__(key, weights, gradient, lr_scale=lr_scale)
        finally:
            self.averages = averages
        if self.nr_update[key] % self._every == 0:
            checkpoints = self._checkpoints.setdefault(key, deque(maxlen=self._last))
            checkpoints.append(weights.copy())
            self.averages[key] = sum(checkpoints) / len(checkpoints)
        return weights, gradient


@registry.optimizers("spacy-cner.AdamCheckpointAverage.v1")
def adam_checkpoint_average(
    learn_rate: FloatOrSeq = ADAM_DEFAULTS["learn_rate"],
    *,
    L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
    beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
    beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
    eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
    grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = cast(bool, ADAM_DEFAULTS["L2_is_weight_decay"]),
    use_averages: bool = True,
    every: int = 100,
    last: int = 5,
) -> CheckpointAverage:
    """Adam.v1's settings, with spaCy evaluating and saving the mean of the weights after the last
    `last` of every `every`-th update (checkpoint averaging) instead of the weights themselves.

    use_averages (bool): Must be true (the default): the checkpoint mean takes the place of
        thinc's moving average. It is accepted so that an Adam.v1 section can switch to this
        optimizer by its @optimizers line alone.
    every (int): Updates between checkpoints.
    last (int): How many of the latest checkpoints are averaged.
    RETURNS (CheckpointAverage): The optimizer.
    """
    if not use_averages:
        raise ValueError(
            "spacy-cner.AdamCheckpointAverage.v1 averages checkpoints in place of thinc's moving average: "
            "use_averages = false would leave nothing to evaluate with. Use Adam.v1 for no averaging."
        )
    return CheckpointAverage(
        learn_rate,
        every=every,
        last=last,
        L2=L2,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
    )
