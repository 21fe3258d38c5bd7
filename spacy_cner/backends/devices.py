"""Where the ops run: the GPU a command or engine was given, or the CPU.

spaCy's commands choose it with a helper of their private CLI module (`spacy.cli._util.setup_gpu`); this is
the same choice and the same messages on the public API (spacy.require_gpu, thinc's gpu_is_available), so a
spaCy release that moves its private helpers does not break the commands here.
"""

import spacy
from thinc.util import gpu_is_available
from wasabi import Printer


def setup_gpu(gpu_id: int, silent: bool = False) -> None:
    """Run on GPU gpu_id (>= 0), or on the CPU (-1), saying which unless silent.

    gpu_id (int): The GPU's id; -1 for the CPU.
    silent (bool): Print nothing.
    Raises ValueError (from spacy.require_gpu) where CuPy or the GPU is missing.
    """
    printer = Printer(no_print=silent, pretty=not silent)
    if gpu_id >= 0:
        printer.info(f"Using GPU: {gpu_id}")
        spacy.require_gpu(gpu_id)
    else:
        printer.info("Using CPU")
        if gpu_is_available():
            printer.info("To switch to GPU 0, use the option: --gpu-id 0")
