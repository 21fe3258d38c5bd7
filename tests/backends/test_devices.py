"""backends/devices.py chooses the device as spaCy's commands do, with their messages."""

import pytest
from thinc.api import get_current_ops
from thinc.util import gpu_is_available

from spacy_cner.backends.devices import setup_gpu


def test_cpu_says_so_and_silent_says_nothing(capsys):
    setup_gpu(-1)
    out = capsys.readouterr().out
    assert "Using CPU" in out and ("--gpu-id 0" in out) == gpu_is_available()
    setup_gpu(-1, silent=True)
    assert capsys.readouterr().out == ""
    assert get_current_ops().name in ("numpy", "cpu")


def test_a_gpu_that_is_not_there_raises_valueerror():
    """robustness and annotate turn this ValueError into their one-line hint."""
    if gpu_is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(ValueError):
        setup_gpu(0, silent=True)
