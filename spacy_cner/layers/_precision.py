"""The precision of crf_ner's products at prediction on the CPU: float32, or bfloat16.

crf_ner's `precision` setting puts its predictions inside `inference_precision`: with "bfloat16",
the torch modules (the BiLSTM, TENER) run under torch's CPU autocast to bfloat16 (their LSTM and
linear products in bfloat16, the rest in float32; their outputs back in float32), and RowwiseOps'
fixed-block products (the tok2vec's Maxout, the output layer) multiply bfloat16 copies of their
inputs and weights (summed in float32 by the kernels, each result rounded to bfloat16, read back in
float32). Everything else (embeddings, the CRF's decoding and probabilities, in float64) is unchanged,
and so is training: only predictions read the setting.

Why bfloat16 and not int8: on CPUs with AMX or AVX512-BF16 (e.g. Intel Xeon since Sapphire Rapids)
torch runs bfloat16 products natively: on the benchmark machine's Xeon (AMX), 2.8x as fast as float32
for one direction of the default's BiLSTM and 2.1x for the tok2vec's Maxout product, on one thread,
while its dynamic int8 LSTM ran slower than float32 (1.08x the time) and made a doc's outputs depend
on its batch (bench/bench_int8.py); end to end, 1.12-1.28x float32's chars/s (bench/bench_speed.py).
Without such instructions bfloat16 is emulated and slower than float32: crf_ner warns when it is set,
or a pipeline saved with it is loaded, there.
"""
import contextlib
import contextvars
import warnings
from typing import Iterator, Optional

import torch

# crf_ner's precision values: its products at prediction in float32 (exact) or bfloat16.
PRECISIONS = ("float32", "bfloat16")
_PRECISION = contextvars.ContextVar("spacy_cner_inference_precision", default="float32")


def validate_precision(value: str) -> str:
    if value not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {value!r}.")
    return value


@contextlib.contextmanager
def inference_precision(precision: str) -> Iterator[None]:
    """Within this block, predictions on the CPU multiply in this precision (see the module)."""
    token = _PRECISION.set(validate_precision(precision))
    try:
        yield
    finally:
        _PRECISION.reset(token)


def bfloat16_products() -> bool:
    """Whether the products being computed now are to be in bfloat16 (inside inference_precision)."""
    return _PRECISION.get() == "bfloat16"


def native_bfloat16() -> Optional[bool]:
    """Whether this CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16), by torch's own
    probes; None where this torch has none to ask."""
    probes = [getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    if all(probe is None for probe in probes):
        return None
    return any(bool(probe()) for probe in probes if probe is not None)


def warn_if_emulated(precision: str, name: str) -> None:
    """Warn, when precision is bfloat16 and this CPU has no native bfloat16 products, that it is slower."""
    if precision == "bfloat16" and native_bfloat16() is False:
        warnings.warn(
            f"{name}: precision 'bfloat16' runs emulated on this CPU (no AMX or AVX512-BF16), slower than "
            f"float32. Set nlp.get_pipe({name!r}).precision = 'float32' here.",
            stacklevel=3,
        )


def autocast_module(device: torch.device):
    """The autocast context a torch module predicts in: bfloat16 on the CPU inside
    inference_precision("bfloat16"), else none."""
    enabled = bfloat16_products() and device.type == "cpu"
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=enabled)


def to_float32(value: torch.Tensor) -> torch.Tensor:
    """A module's output in float32 (the BiLSTM's, TENER's and the lexicon adapter's: one tensor each)."""
    return value.float() if value.dtype == torch.bfloat16 else value
