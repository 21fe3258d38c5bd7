"""Learning-rate schedules that pickle with the optimizer that holds them."""

from thinc.api import registry


@registry.schedules("spacy-cner.warmup_linear.v1")
def warmup_linear(initial_rate: float, warmup_steps: int, total_steps: int) -> "WarmupLinear":
    """thinc's warmup_linear.v1, the same rates: a linear warm-up over warmup_steps, then a linear
    decay to 0 at total_steps.

    Why not thinc's own: in thinc 8 it is a generator, which cannot be pickled, and the optimizer
    nlp.initialize keeps holds it, so an initialized pipeline of the transformer configs did not
    pickle (nlp.pipe(n_process=2) under spawn failed before the pipeline was saved).
    """
    return WarmupLinear(initial_rate, warmup_steps, total_steps)


class WarmupLinear:
    """An iterator over the rates of each step (see warmup_linear)."""

    def __init__(self, initial_rate: float, warmup_steps: int, total_steps: int):
        self.initial_rate, self.warmup_steps, self.total_steps = initial_rate, warmup_steps, total_steps
        self.step = 0

    def __iter__(self) -> "WarmupLinear":
        return self

    def __next__(self) -> float:
        if self.step < self.warmup_steps:
            factor = self.step / max(1, self.warmup_steps)
        else:
            factor = max(0.0, (self.total_steps - self.step) / max(1.0, self.total_steps - self.warmup_steps))
        self.step += 1
        return factor * self.initial_rate
