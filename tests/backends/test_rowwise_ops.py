"""use_rowwise_ops: the CRF tagger's and CharBigramEmbed's layers multiply on RowwiseOps (backends.rowwise_ops)
on CPU."""

import multiprocessing
import os
import platform
import subprocess
import sys
import threading

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from spacy.util import registry
from thinc.api import Model, NumpyOps, fix_random_seed, get_current_ops, set_current_ops

import spacy_cner  # noqa: F401  (registers the layers)
from spacy_cner.backends import rowwise_ops
from spacy_cner.backends.rowwise_ops import RowwiseOps, training_products, use_rowwise_ops
from spacy_cner.layers.char_bigram_embed import CharBigramEmbed

TAGGER = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16, "char_rows": 50, "bigram_rows": 50},
    "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 8},
}
TAG_NAMES = ["O", "B-X", "I-X", "E-X", "S-X"]


def thinc_nodes(model: Model):
    return [node for node in model.walk() if isinstance(node.ops, NumpyOps)]


def test_the_tagger_is_built_on_rowwise_ops_and_predicts_as_on_blis():
    fix_random_seed(0)
    model = registry.resolve({"model": TAGGER})["model"]
    nodes = thinc_nodes(model)
    assert nodes and all(type(node.ops) is RowwiseOps for node in nodes)
    docs = [spacy.blank("zh").make_doc(text) for text in ["北京欢迎你", "上海", "我在南京市长江大桥"]]
    model.initialize(X=docs, Y=TAG_NAMES)
    on_numpy = model.predict(docs)
    model.to_cpu()  # thinc's default CPU ops, blis
    assert all(type(node.ops) is NumpyOps and node.ops.use_blis for node in thinc_nodes(model))
    on_blis = model.predict(docs)
    for ours, theirs in zip(on_numpy, on_blis):
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_char_bigram_embed_alone_is_on_rowwise_ops():
    """A tok2vec component of its own (a listener's source) gets RowwiseOps too."""
    assert all(type(node.ops) is RowwiseOps for node in thinc_nodes(CharBigramEmbed(8, char_rows=20, bigram_rows=20)))


def test_other_ops_are_left_alone():
    class OtherOps(NumpyOps):
        name = "other"

    previous = get_current_ops()
    set_current_ops(OtherOps())
    try:
        model = CharBigramEmbed(8, char_rows=20, bigram_rows=20)
    finally:
        set_current_ops(previous)
    assert all(type(node.ops) is OtherOps for node in model.walk())
    without_blis = NumpyOps(use_blis=False)
    model = Model("mine", lambda model, X, is_train: (X, lambda dY: dY), ops=without_blis)
    use_rowwise_ops(model)
    assert model.ops is without_blis


@pytest.mark.parametrize("n_in,n_out", [(220, 384), (256, 9), (16, 5), (3, 7), (913, 384)])
def test_a_row_comes_out_the_same_alone_and_in_any_batch(n_in, n_out):
    """A product of many rows on OpenBLAS rounds a row by its position in the block: RowwiseOps runs none."""
    rng = numpy.random.default_rng(n_in)
    X = rng.standard_normal((600, n_in)).astype("f")
    W = rng.standard_normal((n_out, n_in)).astype("f")
    ops = RowwiseOps()
    whole = ops.gemm(X, W, trans2=True)
    numpy.testing.assert_allclose(whole, X @ W.T, rtol=1e-4, atol=1e-4)
    for start, length in [(0, 1), (5, 2), (40, 3), (300, 7), (254, 5), (1, 512), (3, 300)]:
        # A copy (on its own alignment) and a view into X (on X's) alike.
        assert numpy.array_equal(
            ops.gemm(X[start : start + length].copy(), W, trans2=True), whole[start : start + length]
        )
        assert numpy.array_equal(ops.gemm(X[start : start + length], W, trans2=True), whole[start : start + length])
    out = numpy.full((3, n_out), numpy.nan, dtype="f")
    assert ops.gemm(X[:3], W.T.copy(), out=out) is out and numpy.array_equal(out, whole[:3])
    assert ops.gemm(X[:0], W, trans2=True).shape == (0, n_out)


@pytest.fixture
def torch_threads():
    """Sets torch's thread count for a test and puts the previous one back."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)


@pytest.mark.parametrize("n_threads", [2, 3, 5])
def test_rows_split_among_threads_come_out_as_on_one(n_threads, torch_threads, monkeypatch):
    """With torch on several threads, the row-by-row products split the rows among as many threads."""
    monkeypatch.setattr(rowwise_ops, "ROWS_PER_THREAD", 16)
    monkeypatch.setattr(rowwise_ops, "_blocks_are_invariant", lambda *shape: False)
    rng = numpy.random.default_rng(n_threads)
    X = rng.standard_normal((203, 220)).astype("f")
    W = rng.standard_normal((384, 220)).astype("f")
    ops = RowwiseOps()
    torch_threads(1)
    alone = ops.gemm(X, W, trans2=True)
    torch_threads(n_threads)
    ran_on = []
    matmul = numpy.matmul
    monkeypatch.setattr(
        rowwise_ops.numpy, "matmul", lambda *a, **k: ran_on.append(threading.current_thread().name) or matmul(*a, **k)
    )
    split = ops.gemm(X, W, trans2=True)
    monkeypatch.undo()
    assert numpy.array_equal(split, alone)
    assert len(ran_on) == n_threads and ran_on.count(threading.current_thread().name) == 1
    assert sum(name.startswith("spacy_cner_rowwise") for name in ran_on) == n_threads - 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (POSIX)")
def test_a_forked_child_multiplies_on_threads_of_its_own(torch_threads, monkeypatch):
    """nlp.pipe(n_process=...) forks: the parent's pool threads do not exist in the child."""
    monkeypatch.setattr(rowwise_ops, "ROWS_PER_THREAD", 16)
    monkeypatch.setattr(rowwise_ops, "_blocks_are_invariant", lambda *shape: False)
    torch_threads(2)
    X = numpy.ones((64, 8), dtype="f")
    W = numpy.ones((8, 3), dtype="f")
    RowwiseOps().gemm(X, W)  # the parent's pool
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        result = pool.apply_async(_product_sum, (X, W))
        assert result.get(timeout=60) == 64 * 3 * 8


def _product_sum(X, W) -> float:
    return float(RowwiseOps().gemm(X, W).sum())


def test_products_over_the_rows_are_whole():
    """trans1 (the weight gradient dY.T @ X) sums over every row, in one product on torch."""
    rng = numpy.random.default_rng(1)
    dY, X = rng.standard_normal((259, 4)).astype("f"), rng.standard_normal((259, 6)).astype("f")
    ops = RowwiseOps()
    numpy.testing.assert_allclose(ops.gemm(dY, X, trans1=True), dY.T @ X, rtol=1e-5, atol=1e-4)
    numpy.testing.assert_allclose(ops.gemm(dY, X.T.copy(), trans1=True, trans2=True), dY.T @ X, rtol=1e-5, atol=1e-4)
    out = numpy.full((4, 6), numpy.nan, dtype="f")
    assert ops.gemm(dY, X, trans1=True, out=out) is out
    numpy.testing.assert_allclose(out, dY.T @ X, rtol=1e-5, atol=1e-4)


@pytest.fixture
def rowwise_calls(monkeypatch):
    """A list that gets an item at every row-invariant product (in fixed blocks or row by row)."""
    calls = []
    for name in ("_rowwise_product", "_block_product"):
        product = getattr(rowwise_ops, name)
        monkeypatch.setattr(rowwise_ops, name, lambda *a, product=product: calls.append(1) or product(*a))
    return calls


def test_training_products_are_whole_and_only_inside_the_block(rowwise_calls):
    """Inside training_products every product is one torch product (no row-invariant call), with
    or without transposes; outside it, row-invariant again, also after an error in the block."""
    rng = numpy.random.default_rng(2)
    X, W = rng.standard_normal((37, 6)).astype("f"), rng.standard_normal((5, 6)).astype("f")
    ops, calls = RowwiseOps(), rowwise_calls
    rowwise_ops._blocks_are_invariant(6, 5, X.dtype)  # its check multiplies in blocks too: done before counting
    calls.clear()
    with training_products():
        numpy.testing.assert_allclose(ops.gemm(X, W, trans2=True), X @ W.T, rtol=1e-5, atol=1e-5)
        numpy.testing.assert_allclose(ops.gemm(X.T.copy(), W.T.copy(), trans1=True), X @ W.T, rtol=1e-5, atol=1e-5)
        out = numpy.full((37, 5), numpy.nan, dtype="f")
        assert ops.gemm(X, W.T.copy(), out=out) is out
        numpy.testing.assert_allclose(out, X @ W.T, rtol=1e-5, atol=1e-5)
    assert calls == []
    with pytest.raises(KeyError), training_products():
        raise KeyError
    ops.gemm(X, W, trans2=True)
    assert calls == [1]


def test_crf_ner_update_multiplies_in_one_piece_and_predicts_row_invariantly(rowwise_calls):
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": TAGGER, "join_examples": 0.0})
    examples = [Example.from_dict(nlp.make_doc("我在北京"), {"entities": [(2, 4, "LOC")]})]
    nlp.initialize(lambda: examples)
    rowwise_calls.clear()
    nlp.update(examples, sgd=None)
    assert rowwise_calls == []
    nlp("我在北京")
    assert rowwise_calls


def test_the_tagger_predicts_a_doc_the_same_alone_and_in_a_batch():
    fix_random_seed(0)
    model = registry.resolve({"model": TAGGER})["model"]
    nlp = spacy.blank("zh")
    docs = [nlp.make_doc(text) for text in ["北京欢迎你", "上海", "我在南京市长江大桥", "好"]]
    model.initialize(X=docs, Y=TAG_NAMES)
    batch = model.predict(docs)
    for doc, scores in zip(docs, batch):
        assert numpy.array_equal(model.predict([doc])[0], scores)


@pytest.mark.parametrize("coretype", ["Haswell", "Sandybridge"])
def test_rows_are_batch_invariant_on_each_openblas_kernel(coretype):
    """A machine's CPU picks numpy's OpenBLAS kernel: the row blocks used before were invariant on
    Sandybridge's and not on Haswell's. Both run here, each in a process of its own."""
    flags = open("/proc/cpuinfo").read() if platform.system() == "Linux" else ""
    if platform.machine() != "x86_64" or " avx2" not in flags:
        pytest.skip("OpenBLAS's Haswell and Sandybridge kernels need an x86-64 CPU with AVX2")
    code = (
        "import numpy\n"
        "from spacy_cner.backends.rowwise_ops import RowwiseOps\n"
        "rng = numpy.random.default_rng(0)\n"
        "X = rng.standard_normal((600, 220)).astype('f')\n"
        "W = rng.standard_normal((384, 220)).astype('f')\n"
        "ops = RowwiseOps()\n"
        "whole = ops.gemm(X, W, trans2=True)\n"
        "parts = [(5, 2), (41, 3), (300, 7), (1, 512)]\n"
        "print(all(numpy.array_equal(ops.gemm(X[s:s + n], W, trans2=True), whole[s:s + n]) for s, n in parts))\n"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": coretype}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]


@pytest.mark.parametrize("n_rows", [0, 1, 63, 64, 65, 511, 512, 513, 1100])
def test_block_products_pad_every_row_count(n_rows):
    """Fixed blocks of 512 and 64 rows, the last padded with zeros: every row count comes out whole."""
    rng = numpy.random.default_rng(n_rows)
    X, W = rng.standard_normal((n_rows, 30)).astype("f"), rng.standard_normal((30, 9)).astype("f")
    product = rowwise_ops._block_product(X, W)
    assert product.shape == (n_rows, 9)
    numpy.testing.assert_allclose(product, X @ W, rtol=1e-4, atol=1e-4)


def test_blocks_are_used_only_where_this_machine_keeps_rows_invariant(monkeypatch):
    """A product whose rows depended on their place in a block fails the check: row by row then, and
    a row still comes out the same alone and in a batch."""
    multiply = torch.mm

    def by_place(left, right, out):  # adds a rounding-sized error that depends on the row's place
        multiply(left, right, out=out)
        out += torch.arange(len(out), dtype=out.dtype)[:, None] * 1e-6
        return out

    monkeypatch.setattr(rowwise_ops.torch, "mm", by_place)
    monkeypatch.setattr(rowwise_ops, "_INVARIANT", {})
    rng = numpy.random.default_rng(4)
    X, W = rng.standard_normal((300, 12)).astype("f"), rng.standard_normal((12, 7)).astype("f")
    assert not rowwise_ops._blocks_are_invariant(12, 7, X.dtype)
    called = []
    rowwise = rowwise_ops._rowwise_product
    monkeypatch.setattr(rowwise_ops, "_rowwise_product", lambda *a: called.append(1) or rowwise(*a))
    whole = RowwiseOps().gemm(X, W)
    assert called and numpy.array_equal(RowwiseOps().gemm(X[5:8], W), whole[5:8])
    monkeypatch.setattr(rowwise_ops.torch, "mm", multiply)
    monkeypatch.setattr(rowwise_ops, "_INVARIANT", {})
    if rowwise_ops._blocks_are_invariant(12, 7, X.dtype):  # this machine's torch: the blocks are used
        called.clear()
        whole = RowwiseOps().gemm(X, W)
        assert not called and numpy.array_equal(RowwiseOps().gemm(X[5:8], W), whole[5:8])


def test_a_wide_product_goes_in_pieces_where_the_whole_width_is_not_invariant(monkeypatch):
    """Where a block product's rows depend on their place only past some width (as MKL cuts a wide sum by
    the block's shape), the columns go in pieces narrow enough, their products added in order: rows
    invariant, no fall-back to row by row, and the product x @ w."""
    multiply = torch.mm

    def wide_by_place(left, right, out):  # a rounding-sized error by the row's place, past 8 columns only
        multiply(left, right, out=out)
        if left.shape[1] > 8:
            out += torch.arange(len(out), dtype=out.dtype)[:, None] * 1e-6
        return out

    monkeypatch.setattr(rowwise_ops.torch, "mm", wide_by_place)
    monkeypatch.setattr(rowwise_ops, "_INVARIANT", {})
    monkeypatch.setattr(rowwise_ops, "PIECE_COLUMNS", 8)
    rng = numpy.random.default_rng(5)
    X, W = rng.standard_normal((300, 20)).astype("f"), rng.standard_normal((20, 7)).astype("f")
    assert not rowwise_ops._blocks_are_invariant(20, 7, X.dtype)
    assert rowwise_ops._pieces(20) == 3 and rowwise_ops._blocks_are_invariant(20, 7, X.dtype, pieces=True)
    called = []
    monkeypatch.setattr(rowwise_ops, "_rowwise_product", lambda *a: called.append(1))
    whole = RowwiseOps().gemm(X, W)
    assert not called
    numpy.testing.assert_allclose(whole, X @ W, rtol=1e-5, atol=1e-5)
    for start, length in [(0, 1), (5, 3), (64, 70), (250, 50)]:
        assert numpy.array_equal(RowwiseOps().gemm(X[start : start + length], W), whole[start : start + length])
