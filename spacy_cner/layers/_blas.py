"""Matrix products on numpy's BLAS for the layers on thinc's CPU ops."""
import numpy
from thinc.api import Model, NumpyOps

# Rows per matrix product in RowBlockOps.gemm.
BLOCK_ROWS = 256


class RowBlockOps(NumpyOps):
    """thinc's NumpyOps, but X @ W runs on numpy's BLAS in blocks of exactly BLOCK_ROWS rows.

    Why not thinc's default: its NumpyOps multiplies with blis, which fell back to its generic
    kernels on the benchmark machine (a virtual "AMD EPYC" whose model it does not recognise:
    `BLIS_ARCH_DEBUG=1` prints "selecting sub-configuration 'generic'") and took 2.6x as long as
    numpy's BLAS (OpenBLAS in numpy's wheels) for the tok2vec's Maxout. Why blocks: OpenBLAS
    takes other code paths for products of a few rows, which round otherwise, so a token's
    scores would depend on what it is batched with (1e-7 apart; blis's do not). Every product
    here has the same shape, the last block padded with zeros: a row comes out the same alone
    and in any batch, and the blocks cost 1.2x the single product. Products that sum over the
    rows (trans1: weight gradients in training) run in one piece.
    """

    def __init__(self, device_type: str = "cpu", device_id: int = -1, **kwargs) -> None:
        super().__init__(device_type, device_id, use_blis=False, **kwargs)

    def gemm(self, x, y, *, out=None, trans1: bool = False, trans2: bool = False):
        if trans1 or x.ndim != 2 or y.ndim != 2:
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
        y = y.T if trans2 else y
        n_rows = x.shape[0]
        if out is None:
            out = numpy.empty((n_rows, y.shape[1]), dtype=numpy.result_type(x, y))
        whole = n_rows - n_rows % BLOCK_ROWS
        for start in range(0, whole, BLOCK_ROWS):
            out[start : start + BLOCK_ROWS] = x[start : start + BLOCK_ROWS] @ y
        if whole < n_rows:
            block = numpy.zeros((BLOCK_ROWS, x.shape[1]), dtype=x.dtype)
            block[: n_rows - whole] = x[whole:]
            out[whole:] = (block @ y)[: n_rows - whole]
        return out


def use_numpy_blas(model: Model) -> None:
    """Put the model's layers that are on thinc's default CPU ops on RowBlockOps.

    The tok2vec's Maxout ran 1.9x faster on one thread of the benchmark machine (People's
    Daily test, 188k characters: 0.60 s against 1.13 s on blis; BENCHMARKS.md "Inference
    speed"), in training and prediction alike. Layers on other ops (CupyOps on a GPU, a
    NumpyOps without blis, AppleOps) are left as they are; thinc's Model.to_cpu() puts a
    model back on blis.
    """
    ops = None
    for node in model.walk():
        if type(node.ops) is NumpyOps and node.ops.use_blis:
            ops = ops or RowBlockOps()
            node.ops = ops
