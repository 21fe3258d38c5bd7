"""The precision of crf_ner's products at prediction on the CPU: float32, or bfloat16.

crf_ner's `precision` setting puts its predictions inside `inference_precision`: with "bfloat16",
the torch modules (the BiLSTM, TENER) run under torch's CPU autocast to bfloat16 (their LSTM and
linear products in bfloat16, the rest in float32; their outputs back in float32), and RowwiseOps'
fixed-block products (the tok2vec's Maxout, the output layer) multiply bfloat16 copies of their
inputs and weights (summed in float32 by the kernels, each result rounded to bfloat16, read back in
float32). Everything else (embeddings, the CRF's decoding and probabilities, in float64) is unchanged,
and so is training: only predictions read the setting.

Why bfloat16 and not int8: on CPUs with AMX or AVX512-BF16 (e.g. Intel Xeon since Sapphire Rapids)
torch runs bfloat16 products natively, faster than float32 for the default's BiLSTM and the tok2vec's
Maxout product, while its dynamic int8 LSTM ran no faster than float32 and made a doc's outputs depend
on its batch (BENCHMARKS.md#inference).
Without such instructions bfloat16 is emulated and slower than float32: crf_ner warns when it is set,
or a pipeline saved with it is loaded, there. Without AVX512 (an AVX2-only CPU, e.g. AMD EPYC before
Zen 4) torch cannot run a bfloat16 LSTM at all (oneDNN: "could not create a primitive descriptor for the
LSTM forward propagation primitive"): there the setting is kept but predictions run in float32, with a
warning (`bfloat16_runs` tries it once per process).
"""

import contextlib
import contextvars
import functools
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
    """Within this block, predictions on the CPU multiply in this precision (see the module); bfloat16
    where this CPU cannot run it (bfloat16_runs) is float32."""
    precision = validate_precision(precision)
    if precision == "bfloat16" and not bfloat16_runs():
        precision = "float32"
    token = _PRECISION.set(precision)
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


@functools.lru_cache(maxsize=None)
def bfloat16_runs() -> bool:
    """Whether torch runs the encoders' products in bfloat16 on this CPU: a tiny bidirectional LSTM under
    CPU autocast, tried once per process. oneDNN has no bfloat16 LSTM without AVX512 (it raises at every
    shape), whatever the CPU's flags say: only running it tells (ONEDNN_MAX_CPU_ISA=AVX2 shows it on
    any x86 CPU)."""
    with torch.random.fork_rng(devices=[]):  # the probe's random weights leave the caller's seeded draws as they were
        lstm = torch.nn.LSTM(4, 4, batch_first=True, bidirectional=True)
    try:
        with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 3, 4))
    except (RuntimeError, NotImplementedError):
        return False
    return True


def warn_where_slower(precision: str, name: str) -> None:
    """Warn, when precision is bfloat16, on a CPU that cannot run it (predictions in float32 there) or
    has no native bfloat16 products (slower than float32)."""
    if precision != "bfloat16":
        return
    if not bfloat16_runs():
        warnings.warn(
            f"{name}: precision 'bfloat16' cannot run on this CPU (torch has no bfloat16 LSTM without AVX512): "
            f"predictions run in float32 here (the setting is kept for CPUs with AMX or AVX512-BF16).",
            stacklevel=3,
        )
    elif native_bfloat16() is False:
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


def mixed_precision_dtype(device: torch.device) -> torch.dtype:
    """The dtype a transformer's mixed precision (its mixed_precision setting) computes in on a GPU:
    bfloat16 where the GPU has it (Ampere and later: float32's range, so no gradient overflows for the
    loss scaling to catch), else float16."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


@contextlib.contextmanager
def mixed_precision(device: torch.device, enabled: bool) -> Iterator[None]:
    """Within this block, autocast on a GPU (enabled) computes in mixed_precision_dtype, also where other
    code opens it without a dtype (thinc's PyTorchShim.begin_update: float16 by default). Autocast's
    dtype is per thread; on a CPU (a transformer's mixed precision is for GPUs) nothing changes."""
    if not (enabled and device.type == "cuda"):
        yield
        return
    previous = torch.get_autocast_dtype("cuda")
    torch.set_autocast_dtype("cuda", mixed_precision_dtype(device))
    try:
        with torch.autocast(device_type="cuda"):
            yield
    finally:
        torch.set_autocast_dtype("cuda", previous)
