"""Matrix products on numpy's BLAS for the layers on thinc's CPU ops."""
from thinc.api import Model, NumpyOps


def use_numpy_blas(model: Model) -> None:
    """Let the model's layers on thinc's default CPU ops multiply matrices with numpy's BLAS.

    thinc's NumpyOps multiplies with blis on one thread; numpy's BLAS (OpenBLAS in numpy's
    wheels, threads as OMP_NUM_THREADS / OPENBLAS_NUM_THREADS say) did the tok2vec's Maxout
    2.0x faster on one thread of the benchmark machine (People's Daily test, 188k characters:
    0.56 s against 1.13 s; BENCHMARKS.md "Inference speed"), in training and prediction alike.
    Layers on other ops (CupyOps on a GPU, a NumpyOps without blis, AppleOps) are left as they
    are; thinc's Model.to_cpu() puts a model back on blis.
    """
    numpy_blas = None
    for node in model.walk():
        if type(node.ops) is NumpyOps and node.ops.use_blis:
            numpy_blas = numpy_blas or NumpyOps(use_blis=False)
            node.ops = numpy_blas
