"""Matrix products on numpy's BLAS for the layers on thinc's CPU ops."""
import contextlib
import contextvars
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Tuple

import numpy
import torch
from thinc.api import Model, NumpyOps

# Bytes every row of a product starts on a multiple of (a cache line; wider than any SIMD load).
ALIGN_BYTES = 64
# The dtypes whose weight-gradient products run on torch.
FLOATS = (numpy.dtype("float32"), numpy.dtype("float64"))
# Whether RowwiseOps multiplies row by row (see training_products).
_ROWWISE = contextvars.ContextVar("spacy_cner_rowwise_products", default=True)
# Fewest rows a thread of a row-by-row product gets (a task costs tens of microseconds; a row
# of the tok2vec's Maxout about one).
ROWS_PER_THREAD = 256
# (threads, pool): the threads of the row-by-row products. A forked child (nlp.pipe with
# n_process > 1) has none of the parent's threads: it makes its own, as layers._torch resets
# torch's there.
_POOL: Optional[Tuple[int, ThreadPoolExecutor]] = None


def _forget_pool() -> None:
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


@contextlib.contextmanager
def training_products() -> Iterator[None]:
    """Within this block, RowwiseOps multiplies in one piece, on torch.

    For training steps (crf_ner's update): nothing there is compared across batches, and the
    products row by row took 12% of a step of the default config (the tok2vec's Maxout and the
    output layer, forward and backward; bench/HISTORY.md "Training steps 22% faster").
    """
    token = _ROWWISE.set(False)
    try:
        yield
    finally:
        _ROWWISE.reset(token)


class RowwiseOps(NumpyOps):
    """thinc's NumpyOps, but X @ W runs on numpy's BLAS one row at a time, each row at the same alignment.

    Why not thinc's default: its NumpyOps multiplies with blis, which falls back to its generic
    kernels on the benchmark machine (a virtual "AMD EPYC" whose model it does not recognise:
    `BLIS_ARCH_DEBUG=1` prints "selecting sub-configuration 'generic'"): 1.4x as long as the
    products here for the tok2vec's Maxout. Why one row at a time: a token's scores must not
    depend on what it is batched with (the same doc alone, in a batch, in another process). A
    product of many rows does not give that on OpenBLAS: with its Haswell kernels (the one it
    picks on that machine) a row's result depends on its position in the block, 1e-5 apart. Here
    every row is its own vector-matrix product of the same shape (numpy's stacked matmul, one
    BLAS call per row), its row padded with zeros to a multiple of ALIGN_BYTES and placed on
    that alignment, so each row meets the same arithmetic wherever it comes from (one thread:
    OpenBLAS starts no threads for a vector-matrix product of this size). Products that sum over
    the rows (trans1: weight gradients in training) run in one piece, on torch, and so does
    every product inside training_products().
    """

    def __init__(self, device_type: str = "cpu", device_id: int = -1, **kwargs) -> None:
        super().__init__(device_type, device_id, use_blis=False, **kwargs)

    def gemm(self, x, y, *, out=None, trans1: bool = False, trans2: bool = False):
        in_one_piece = trans1 or not _ROWWISE.get()
        if x.ndim != 2 or y.ndim != 2 or (in_one_piece and (x.dtype != y.dtype or x.dtype not in FLOATS)):
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
        if in_one_piece:
            # On torch's threads (the BiLSTM's): numpy's BLAS would start its own, and the two
            # thread pools spinning against each other on 2 cores doubled the time of a
            # training step (torch's and OpenBLAS's default 2 threads each).
            left, right = torch.from_numpy(x), torch.from_numpy(y)
            product = ((left.T if trans1 else left) @ (right.T if trans2 else right)).numpy()
        else:
            product = _rowwise_product(x, y.T if trans2 else y)
        if out is None:
            return product
        out[...] = product
        return out


def _rowwise_product(x: numpy.ndarray, y: numpy.ndarray) -> numpy.ndarray:
    """x @ y, each row of x its own product, padded and aligned (see RowwiseOps).

    With torch set to more than one thread (its default: one per core), the rows are split
    among that many threads (numpy's BLAS calls release the GIL): each row is still its own
    product, so the result is the same whatever the split.
    """
    dtype = numpy.result_type(x, y)
    (n_rows, width), n_out = x.shape, y.shape[1]
    # Zero columns and rows add exact zeros: the padding changes no sum.
    padded = width + (-width * dtype.itemsize) % ALIGN_BYTES // dtype.itemsize
    rows = _aligned_zeros((n_rows, 1, padded), dtype)  # shape: (n_rows, 1, padded)
    rows[:, 0, :width] = x
    weights = _aligned_zeros((padded, n_out), dtype)
    weights[:width] = y
    out = numpy.empty((n_rows, 1, n_out), dtype=dtype)
    n_threads = min(torch.get_num_threads(), n_rows // ROWS_PER_THREAD)
    if n_threads <= 1:
        numpy.matmul(rows, weights, out=out)
    else:
        bounds = numpy.linspace(0, n_rows, n_threads + 1).astype(int).tolist()
        pieces = list(zip(bounds[:-1], bounds[1:]))
        # The calling thread takes the first piece, the pool the others.
        pool = _pool(n_threads - 1)
        tasks = [pool.submit(numpy.matmul, rows[start:end], weights, out=out[start:end]) for start, end in pieces[1:]]
        numpy.matmul(rows[: pieces[0][1]], weights, out=out[: pieces[0][1]])
        for task in tasks:
            task.result()
    return out[:, 0]


def _pool(n_threads: int) -> ThreadPoolExecutor:
    """A thread pool of at least n_threads for this process."""
    global _POOL
    if _POOL is None or _POOL[0] < n_threads:
        if _POOL is not None:
            _POOL[1].shutdown(wait=False)
        _POOL = (n_threads, ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="spacy_cner_rowwise"))
    return _POOL[1]


def _aligned_zeros(shape, dtype) -> numpy.ndarray:
    """A C-contiguous array of zeros whose first element is on a multiple of ALIGN_BYTES."""
    size = int(numpy.prod(shape))
    itemsize = numpy.dtype(dtype).itemsize
    buffer = numpy.zeros(size + ALIGN_BYTES // itemsize, dtype=dtype)
    start = (-buffer.ctypes.data % ALIGN_BYTES) // itemsize
    return buffer[start : start + size].reshape(shape)


def use_numpy_blas(model: Model) -> None:
    """Put the model's layers that are on thinc's default CPU ops on RowwiseOps.

    The tok2vec's Maxout ran 1.4x faster on one thread of the benchmark machine (50,000 rows of
    220 -> 384: 0.22 s against 0.31 s on blis; bench/bench_products.py), in training and
    prediction alike. Layers on other ops (CupyOps on a GPU, a NumpyOps without blis, AppleOps)
    are left as they are; thinc's Model.to_cpu() puts a model back on blis.
    """
    ops = None
    for node in model.walk():
        if type(node.ops) is NumpyOps and node.ops.use_blis:
            ops = ops or RowwiseOps()
            node.ops = ops
