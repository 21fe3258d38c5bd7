"""Checkpoint averaging (spacy-cner.AdamCheckpointAverage.v1): Adam's steps, the mean of the last checkpoints."""

from pathlib import Path

import numpy
import pytest
from spacy import util
from thinc.api import Adam, registry

import test_averages
from spacy_cner.training.checkpoint_average import CheckpointAverage, adam_checkpoint_average
from test_averages import ENCODERS, TOK2VEC, check_averages_used, trained

CONFIG = Path(__file__).parent.parent.parent / "configs" / "default.cfg"


def test_steps_are_adams_and_averages_are_the_mean_of_the_last_checkpoints():
    rng = numpy.random.default_rng(0)
    ours = adam_checkpoint_average(0.01, every=3, last=2)
    theirs = Adam(0.01, use_averages=False)
    key = (1, "W")
    mine = rng.normal(size=(4, 3)).astype("f")
    plain = mine.copy()
    snapshots = []
    for update in range(1, 11):
        gradient = rng.normal(size=(4, 3)).astype("f")
        mine, _ = ours(key, mine, gradient.copy())
        plain, _ = theirs(key, plain, gradient.copy())
        numpy.testing.assert_array_equal(mine, plain)
        if update % 3 == 0:
            snapshots.append(mine.copy())
        if update < 3:
            assert key not in ours.averages  # no checkpoint yet: spaCy evaluates the weights themselves
        else:
            numpy.testing.assert_allclose(ours.averages[key], numpy.mean(snapshots[-2:], axis=0), rtol=1e-6, atol=1e-7)
    # Updates 6 and 9 are the last two checkpoints; update 10's weights are not in the mean.
    assert not numpy.allclose(ours.averages[key], mine)


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_spacy_evaluates_with_the_checkpoint_mean(encoder, monkeypatch):
    # test_averages trains with Adam(0.01, use_averages=True): the same run with checkpoints.
    monkeypatch.setattr(test_averages, "Adam", lambda rate, use_averages: CheckpointAverage(rate, every=2, last=2))
    nlp, optimizer = trained(TOK2VEC, ENCODERS[encoder])
    assert isinstance(optimizer, CheckpointAverage)
    check_averages_used(nlp, optimizer)


def test_an_adam_section_switches_by_its_optimizer_line():
    overrides = {
        "training.optimizer.@optimizers": "spacy-cner.AdamCheckpointAverage.v1",
        "training.optimizer.use_averages": True,
    }
    config = util.load_config(CONFIG, overrides=overrides, interpolate=True)
    optimizer = registry.resolve({"optimizer": config["training"]["optimizer"]})["optimizer"]
    assert isinstance(optimizer, CheckpointAverage)
    assert optimizer.learn_rate == config["training"]["optimizer"]["learn_rate"]
    assert optimizer.L2 == config["training"]["optimizer"]["L2"]


def test_settings_it_cannot_use_raise():
    with pytest.raises(ValueError, match="use_averages = false"):
        adam_checkpoint_average(0.001, use_averages=False)
    with pytest.raises(ValueError, match="every >= 1"):
        adam_checkpoint_average(0.001, every=0)
    with pytest.raises(ValueError, match="last >= 1"):
        adam_checkpoint_average(0.001, last=0)
