"""Row-invariant matrix products for the layers on thinc's CPU ops: fixed blocks on torch, else row by row."""

import contextlib
import contextvars
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, Optional, Tuple

import numpy
import torch
from thinc.api import Model, NumpyOps

from .precision import bfloat16_products

# Bytes every row of a product starts on a multiple of (a cache line; wider than any SIMD load).
ALIGN_BYTES = 64
# The dtypes whose weight-gradient products run on torch.
FLOATS = (numpy.dtype("float32"), numpy.dtype("float64"))
# Whether RowwiseOps multiplies row-invariantly (in fixed blocks or row by row; see training_products).
_ROWWISE = contextvars.ContextVar("spacy_cner_rowwise_products", default=True)
# Fewest rows a thread of a row-by-row product gets (a task costs tens of microseconds; a row
# of the tok2vec's Maxout about one).
ROWS_PER_THREAD = 256
# (threads, pool): the threads of the row-by-row products. A forked child (nlp.pipe with
# n_process > 1) has none of the parent's threads: it makes its own, as layers._torch resets
# torch's there.
_POOL: Optional[Tuple[int, ThreadPoolExecutor]] = None
# The two shapes of a fixed-block product: its rows go in blocks of BLOCK_ROWS[0], the rest in
# blocks of BLOCK_ROWS[1], the last padded with zero rows (see _block_product).
# 512 rows multiply as fast as 1,024 here and halve the check (_check_blocks, at the first doc).
BLOCK_ROWS = (512, 64)
# The most input columns of one fixed-block product where the whole width is not invariant: a wider product is
# cut into pieces of equal width (at most this), their products added in order (see _block_product).
PIECE_COLUMNS = 512
# (n_in, n_out, dtype, torch's threads, bfloat16, pieces) -> whether a row comes out of torch's fixed-block
# products the same at any place in either block and on one thread (_blocks_are_invariant).
_INVARIANT: Dict[Tuple[int, int, str, int, bool, int], bool] = {}


def _forget_pool() -> None:
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


@contextlib.contextmanager
def training_products() -> Iterator[None]:
    """Within this block, RowwiseOps multiplies in one piece, on torch.

    For training steps (crf_ner's update): nothing there is compared across batches, and the
    products row by row took a good share of a step of the default config (the tok2vec's Maxout
    and the output layer, forward and backward; BENCHMARKS.md#training).
    """
    token = _ROWWISE.set(False)
    try:
        yield
    finally:
        _ROWWISE.reset(token)


class RowwiseOps(NumpyOps):
    """thinc's NumpyOps, but X @ W gives each row of X the same result whatever rows it comes with.

    Why not thinc's default: its NumpyOps multiplies with blis, which falls back to its generic
    kernels on the benchmark machine (a virtual "AMD EPYC" whose model it does not recognise:
    `BLIS_ARCH_DEBUG=1` prints "selecting sub-configuration 'generic'"), slower than the products
    here for the tok2vec's Maxout. Why row-invariant: a token's scores must not depend on
    what it is batched with (the same doc alone, in a batch, in another process). A product of
    many rows does not give that on OpenBLAS: with its Haswell kernels (the one it picks on that
    machine) a row's result depends on its position in the block, 1e-5 apart. Here the rows go
    in blocks of two fixed shapes on torch (_block_product) where this machine gives a row the same
    result anywhere in them and on any thread count (_blocks_are_invariant, checked once per shape);
    elsewhere every row is its own vector-matrix product of the same shape (numpy's stacked matmul,
    one BLAS call per row), its row padded with zeros to a multiple of ALIGN_BYTES and placed on
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
            weights = y.T if trans2 else y
            blocks = x.dtype == weights.dtype and x.dtype in FLOATS
            if blocks and bfloat16_products() and _blocks_are_invariant(*weights.shape, x.dtype, bfloat16=True):
                product = _block_product(x, weights, bfloat16=True)
            elif blocks and _blocks_are_invariant(*weights.shape, x.dtype):
                product = _block_product(x, weights)
            elif (
                blocks and _pieces(weights.shape[0]) > 1 and _blocks_are_invariant(*weights.shape, x.dtype, pieces=True)
            ):
                product = _block_product(x, weights, pieces=_pieces(weights.shape[0]))
            else:
                product = _rowwise_product(x, weights)
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


def _pieces(n_in: int) -> int:
    """How many pieces of at most PIECE_COLUMNS input columns a product of n_in columns is cut into."""
    return -(-n_in // PIECE_COLUMNS)


def _block_product(x: numpy.ndarray, y: numpy.ndarray, bfloat16: bool = False, pieces: int = 1) -> numpy.ndarray:
    """x @ y on torch in fixed blocks: the rows in blocks of BLOCK_ROWS[0], then of BLOCK_ROWS[1],
    the last padded with zero rows, every block one product of the same shape (torch's threads);
    bfloat16: of x and y rounded to bfloat16 (backends.precision), the result back in x's dtype;
    pieces > 1: the input columns cut into that many pieces of equal width (the last narrower), each
    piece's block product added to the sum of the ones before it, in order.

    Why pieces: past some width (between 768 and 800 columns for 384 outputs on an AVX-512 Xeon) MKL
    cuts the sum over the columns itself, and where it cuts depends on the block's shape, so a row's
    result differs between the two block shapes; a width-913 Maxout (lac_context's) then fell back to
    row by row. Pieces narrow enough keep each product in one cut; the additions after are the same for
    every row. _blocks_are_invariant checks the cut product as it checks the whole one.

    Why blocks of two fixed shapes and not one product: on OpenBLAS a row's result depends on its
    place in a product of many rows; torch's (MKL's on the benchmark machine) does not, but what a
    library does with other shapes, kernels or machines is not ours to assume. Every block here is
    one of two shapes, and _blocks_are_invariant checks those shapes on this machine, with this
    thread count, before they are used: a row comes out the same wherever it sits in either and
    on one thread. Faster than row by row for the tok2vec's Maxout (BENCHMARKS.md#inference).
    """
    (n_rows, width), n_out = x.shape, y.shape[1]
    if pieces > 1:
        step = -(-width // pieces)
        total = _block_product(x[:, :step], y[:step], bfloat16)
        for start in range(step, width, step):
            total += _block_product(x[:, start : start + step], y[start : start + step], bfloat16)
        return total
    big, small = BLOCK_ROWS
    n_big = n_rows // big
    n_padded = n_big * big + -(-(n_rows - n_big * big) // small) * small
    if bfloat16:  # rounded straight into the padded bfloat16 blocks (torch's own allocations are aligned)
        left = torch.zeros((n_padded, width), dtype=torch.bfloat16)
        left[:n_rows] = torch.from_numpy(numpy.ascontiguousarray(x))
        right = torch.from_numpy(numpy.ascontiguousarray(y)).to(torch.bfloat16)
        product = torch.zeros((n_padded, n_out), dtype=torch.bfloat16)
    else:
        rows = _aligned_zeros((n_padded, width), x.dtype)
        rows[:n_rows] = x
        weights = _aligned_zeros((width, n_out), x.dtype)
        weights[...] = y
        left, right = torch.from_numpy(rows), torch.from_numpy(weights)
        out = _aligned_zeros((n_padded, n_out), x.dtype)
        product = torch.from_numpy(out)
    starts = [(start, big) for start in range(0, n_big * big, big)]
    starts += [(start, small) for start in range(n_big * big, n_padded, small)]
    for start, size in starts:
        torch.mm(left[start : start + size], right, out=product[start : start + size])
    if bfloat16:
        return product[:n_rows].to(torch.float32).numpy().astype(x.dtype, copy=False)
    return out[:n_rows]


def _blocks_are_invariant(
    n_in: int, n_out: int, dtype: numpy.dtype, bfloat16: bool = False, pieces: bool = False
) -> bool:
    """Whether _block_product (in bfloat16: of bfloat16 copies) gives a row the same result at every
    place in both block shapes and on one thread as on torch's current thread count (checked once per
    shape, precision and thread count).

    Random rows are placed at every offset within a SIMD-sized period of the small block and at
    offsets across the big one (its thread partitions included); their results must be bit-equal
    to those of the rows in a small block on one thread. Where they are not, RowwiseOps multiplies
    row by row instead (exact on any kernel, half as fast); in bfloat16, in float32 instead, said
    once per shape.
    """
    threads = torch.get_num_threads()
    n_pieces = _pieces(n_in) if pieces else 1
    key = (n_in, n_out, numpy.dtype(dtype).str, threads, bfloat16, n_pieces)
    if key not in _INVARIANT:
        _INVARIANT[key] = _check_blocks(n_in, n_out, numpy.dtype(dtype), threads, bfloat16, n_pieces)
        if bfloat16 and not _INVARIANT[key]:
            warnings.warn(
                f"bfloat16 products of {n_in} -> {n_out} do not give a row the same result wherever it "
                "is batched on this machine: they run in float32 (precision 'bfloat16' saves less here)."
            )
    return _INVARIANT[key]


def _check_blocks(
    n_in: int, n_out: int, dtype: numpy.dtype, threads: int, bfloat16: bool = False, pieces: int = 1
) -> bool:
    big, small = BLOCK_ROWS
    rng = numpy.random.default_rng(0)
    weights = rng.standard_normal((n_in, n_out)).astype(dtype)
    probe = rng.standard_normal((small, n_in)).astype(dtype)
    filler = rng.standard_normal((big, n_in)).astype(dtype)
    try:
        torch.set_num_threads(1)
        reference = _block_product(probe, weights, bfloat16, pieces)
    finally:
        torch.set_num_threads(threads)
    for shift in list(range(17)) + [24, 32, 48]:  # every place in the small block's first 16 and more
        moved = _block_product(numpy.roll(probe, shift, axis=0), weights, bfloat16, pieces)
        if not numpy.array_equal(moved, numpy.roll(reference, shift, axis=0)):
            return False
    for offset in (0, 1, 7, big // 2 - 1, big // 2 + 3, big - small):  # in the big block
        rows = filler.copy()
        rows[offset : offset + small] = probe
        if not numpy.array_equal(_block_product(rows, weights, bfloat16, pieces)[offset : offset + small], reference):
            return False
    return True


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


def use_rowwise_ops(model: Model) -> None:
    """Put the model's layers that are on thinc's default CPU ops on RowwiseOps.

    The tok2vec's Maxout ran faster than on blis on one thread of the benchmark machine
    (BENCHMARKS.md#inference), in training and prediction alike. Layers on other ops (CupyOps on a
    GPU, a NumpyOps without blis, AppleOps)
    are left as they are; thinc's Model.to_cpu() puts a model back on blis.
    """
    ops = None
    for node in model.walk():
        if type(node.ops) is NumpyOps and node.ops.use_blis:
            ops = ops or RowwiseOps()
            node.ops = ops
