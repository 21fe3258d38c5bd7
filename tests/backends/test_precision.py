"""crf_ner's precision setting: its products at prediction on the CPU in float32 or bfloat16."""

import os
import subprocess
import sys
import warnings

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam, fix_random_seed

from spacy_cner.backends import precision as _precision, rowwise_ops
from spacy_cner.backends.precision import inference_precision

TRAIN = [
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四在北京工作", [(0, 2, "PER"), (3, 5, "LOC")]),
    ("王五来自广州", [(0, 2, "PER"), (4, 6, "LOC")]),
]
TEXTS = ["张三去了上海", "李四在北京工作", "王五来自广州", "张三在北京", "李四去了广州工作，王五来自上海"]
SMALL = {"tok2vec": {"width": 16, "embed_width": 8, "char_rows": 200, "bigram_rows": 200}, "encoder": {"width": 16}}
# The tests of bfloat16's own products; the fallback's tests below run on every CPU.
needs_bfloat16 = pytest.mark.skipif(
    not _precision.bfloat16_runs(),
    reason="this CPU cannot run torch's bfloat16 LSTM (no AVX512): crf_ner predicts in float32 here "
    "(test_bfloat16_where_the_cpu_cannot_run_it_predicts_in_float32)",
)


@pytest.fixture(scope="module")
def trained():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": SMALL})
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN]
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    return nlp


def entities(nlp, texts):
    return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]


def emissions(pipe, docs, precision):
    pipe.precision = precision
    return pipe._decode(docs, best_path=False).emissions


def test_precision_is_validated_and_float32_by_default(trained):
    pipe = trained.get_pipe("crf_ner")
    assert pipe.precision == "float32" and trained.config["components"]["crf_ner"]["precision"] == "float32"
    with pytest.raises(ValueError, match="precision must be one of 'float32', 'bfloat16', got 'int8'"):
        pipe.precision = "int8"
    with pytest.raises(ValueError, match="precision must be one of"):
        spacy.blank("zh").add_pipe("crf_ner", config={"model": SMALL, "precision": "float16"})


@needs_bfloat16
def test_bfloat16_rounds_the_products_and_keeps_the_entities(trained):
    """bfloat16 emissions are near float32's, not equal (the products were rounded), and give the same
    entities; float32 comes back exactly once set again."""
    pipe = trained.get_pipe("crf_ner")
    docs = [trained.make_doc(text) for text in TEXTS]
    exact = emissions(pipe, docs, "float32")
    try:
        rounded = emissions(pipe, docs, "bfloat16")
        found = entities(trained, TEXTS)
    finally:
        pipe.precision = "float32"
    assert all(r.dtype == numpy.float32 for r in rounded)
    assert any(not numpy.array_equal(r, e) for r, e in zip(rounded, exact))
    for r, e in zip(rounded, exact):
        numpy.testing.assert_allclose(r, e, atol=0.05 * float(numpy.abs(e).max()))
    assert found == entities(trained, TEXTS) and any(found)
    assert all(numpy.array_equal(a, b) for a, b in zip(emissions(pipe, docs, "float32"), exact))


@needs_bfloat16
def test_bfloat16_predicts_a_doc_alike_alone_and_in_a_batch(trained):
    pipe = trained.get_pipe("crf_ner")
    docs = [trained.make_doc(text) for text in TEXTS]
    try:
        batched = emissions(pipe, docs, "bfloat16")
        alone = [emissions(pipe, [doc], "bfloat16")[0] for doc in docs]
        found = [entities(trained, [text])[0] for text in TEXTS]
        assert found == entities(trained, TEXTS)
    finally:
        pipe.precision = "float32"
    for a, b in zip(alone, batched):
        numpy.testing.assert_allclose(a, b, atol=1e-2 * float(numpy.abs(b).max()))


@needs_bfloat16
def test_bfloat16_block_products_are_rounded_products_in_fixed_blocks():
    rng = numpy.random.default_rng(0)
    X, W = rng.standard_normal((600, 40)).astype("f"), rng.standard_normal((40, 24)).astype("f")
    product = rowwise_ops._block_product(X, W, bfloat16=True)
    rounded = (torch.from_numpy(X).bfloat16().float() @ torch.from_numpy(W).bfloat16().float()).numpy()
    assert product.dtype == numpy.float32 and product.shape == (600, 24)
    numpy.testing.assert_allclose(product, rounded, rtol=2e-2, atol=2e-2)
    assert not numpy.array_equal(product, X @ W)
    ops = rowwise_ops.RowwiseOps()
    exact = ops.gemm(X, W)
    with inference_precision("bfloat16"):
        # This machine keeps a row's bfloat16 result in any block, or it multiplies in float32.
        if rowwise_ops._blocks_are_invariant(40, 24, X.dtype, bfloat16=True):
            assert numpy.array_equal(ops.gemm(X[7:9], W), ops.gemm(X, W)[7:9])
            assert numpy.array_equal(ops.gemm(X, W), product)
        else:  # float32's products instead
            assert numpy.array_equal(ops.gemm(X, W), exact)
    with rowwise_ops.training_products(), inference_precision("bfloat16"):  # training multiplies as it did
        numpy.testing.assert_allclose(ops.gemm(X, W), X @ W, rtol=1e-5, atol=1e-4)


def test_bfloat16_blocks_that_are_not_row_invariant_run_in_float32_and_say_so(monkeypatch):
    multiply = torch.mm

    def by_place(left, right, out):  # an error that depends on the row's place in the block
        multiply(left, right, out=out)
        out += torch.arange(len(out), dtype=out.dtype)[:, None] * 1e-2
        return out

    monkeypatch.setattr(rowwise_ops.torch, "mm", by_place)
    monkeypatch.setattr(rowwise_ops, "_INVARIANT", {})
    rng = numpy.random.default_rng(1)
    X, W = rng.standard_normal((100, 12)).astype("f"), rng.standard_normal((12, 7)).astype("f")
    with pytest.warns(UserWarning, match="bfloat16 products of 12 -> 7 .* run in float32"):
        assert not rowwise_ops._blocks_are_invariant(12, 7, X.dtype, bfloat16=True)
    monkeypatch.setattr(rowwise_ops.torch, "mm", multiply)
    with inference_precision("bfloat16"):
        product = rowwise_ops.RowwiseOps().gemm(X, W)
    assert numpy.array_equal(product, rowwise_ops.RowwiseOps().gemm(X, W))  # float32's, as without the setting


def test_precision_is_saved_with_the_pipe_and_training_is_unchanged(trained, tmp_path):
    pipe = trained.get_pipe("crf_ner")
    pipe.precision = "bfloat16"
    try:
        expected = entities(trained, TEXTS)
        trained.to_disk(tmp_path / "model")
    finally:
        pipe.precision = "float32"
    loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("crf_ner").precision == "bfloat16" and entities(loaded, TEXTS) == expected
    # Training reads no precision: the same update, weight for weight, under either setting.
    updated = {}
    for precision in ("float32", "bfloat16"):
        nlp = spacy.load(tmp_path / "model")
        nlp.get_pipe("crf_ner").precision = precision
        fix_random_seed(1)
        examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN]
        losses = nlp.update(examples, sgd=Adam(0.01))
        updated[precision] = (losses["crf_ner"], nlp.get_pipe("crf_ner").model.get_ref("tok2vec").to_bytes())
    assert updated["float32"] == updated["bfloat16"]


def test_bfloat16_warns_on_a_cpu_without_native_bfloat16(monkeypatch, trained):
    monkeypatch.setattr(_precision, "bfloat16_runs", lambda: True)  # emulated, as with AVX512 but no BF16
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert _precision.native_bfloat16() is False
    pipe = trained.get_pipe("crf_ner")
    with pytest.warns(UserWarning, match="runs emulated on this CPU .* slower than float32"):
        pipe.precision = "bfloat16"
    saved = pipe.to_bytes()
    pipe.precision = "float32"
    try:
        with pytest.warns(UserWarning, match="runs emulated on this CPU"):  # a pipe saved with it, loaded here
            pipe.from_bytes(saved)
        assert pipe.precision == "bfloat16"
    finally:
        pipe.precision = "float32"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert _precision.native_bfloat16() is True


def test_bfloat16_is_refused_for_a_transformer_tok2vec(tiny_bert):
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(tiny_bert)},
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    with pytest.raises(ValueError, match="not for a transformer tok2vec"):
        nlp.get_pipe("crf_ner").precision = "bfloat16"
    with pytest.raises(ValueError, match="not for a transformer tok2vec"):
        spacy.blank("zh").add_pipe("crf_ner", config={"model": model, "precision": "bfloat16"})


@needs_bfloat16
@pytest.mark.parametrize("config", ["default", "fast", "char_bigram", "lexicon", "tener"])
def test_every_cpu_config_predicts_in_bfloat16_near_float32(config, request):
    """Each shipped CPU config's tagger (BiLSTM, TENER, lexicon adapter, static vectors) runs in bfloat16,
    its emission scores within bfloat16's rounding of float32's."""
    from conftest import TRAIN_DATA, small_config_pipeline

    nlp = small_config_pipeline(config, request)
    pipe = nlp.get_pipe("crf_ner")
    docs = [nlp.make_doc(text) for text, _ in TRAIN_DATA]
    exact = emissions(pipe, docs, "float32")
    rounded = emissions(pipe, docs, "bfloat16")
    assert any(not numpy.array_equal(r, e) for r, e in zip(rounded, exact))
    for r, e in zip(rounded, exact):
        numpy.testing.assert_allclose(r, e, atol=0.05 * max(1.0, float(numpy.abs(e).max())))


def test_bfloat16_where_the_cpu_cannot_run_it_predicts_in_float32(monkeypatch, trained, tmp_path):
    """Where torch cannot run a bfloat16 LSTM (an AVX2-only CPU; forced here, so that it is tested on any
    CPU): setting bfloat16 warns in one line, predictions are float32's exactly, and a pipeline saved with
    bfloat16 loads, warns and predicts as float32, its setting kept."""
    monkeypatch.setattr(_precision, "bfloat16_runs", lambda: False)
    pipe = trained.get_pipe("crf_ner")
    docs = [trained.make_doc(text) for text in TEXTS]
    exact, found = emissions(pipe, docs, "float32"), entities(trained, TEXTS)
    try:
        with pytest.warns(
            UserWarning,
            match=r"crf_ner: precision 'bfloat16' cannot run on this CPU .*"
            "predictions run in float32 here",
        ) as caught:
            pipe.precision = "bfloat16"
        assert len(caught) == 1 and "\n" not in str(caught[0].message)
        assert all(numpy.array_equal(a, b) for a, b in zip(pipe._decode(docs, best_path=False).emissions, exact))
        assert entities(trained, TEXTS) == found
        trained.to_disk(tmp_path / "model")
    finally:
        pipe.precision = "float32"
    with pytest.warns(UserWarning, match="cannot run on this CPU"):
        loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("crf_ner").precision == "bfloat16" and entities(loaded, TEXTS) == found


def test_bfloat16_runs_is_a_probe_of_this_cpu_not_a_guess(trained, tmp_path):
    """The probe runs torch's bfloat16 LSTM: with oneDNN held to AVX2 (as on an AVX2-only CPU) it fails,
    and a pipeline saved with bfloat16 still loads and predicts, in float32."""
    pipe = trained.get_pipe("crf_ner")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.precision = "bfloat16"
        try:
            trained.to_disk(tmp_path / "model")
        finally:
            pipe.precision = "float32"
    code = (
        "import json, spacy, warnings\n"
        "from spacy_cner.backends.precision import bfloat16_runs\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    nlp = spacy.load({str(tmp_path / 'model')!r})\n"
        f"    ents = [[(e.start_char, e.end_char, e.label_) for e in nlp(t).ents] for t in {TEXTS!r}]\n"
        "print(json.dumps([bfloat16_runs(), [str(w.message) for w in caught], ents]))\n"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    runs, said, found = __import__("json").loads(result.stdout.splitlines()[-1])
    if runs:
        pytest.skip("oneDNN here ignores ONEDNN_MAX_CPU_ISA (not an x86 build)")
    assert any("cannot run on this CPU" in message for message in said)
    assert [[tuple(e) for e in doc] for doc in found] == entities(trained, TEXTS)


@pytest.mark.parametrize("bf16", [True, False])
def test_mixed_precision_on_a_gpu_is_bfloat16_where_it_has_it(bf16, monkeypatch):
    """The dtype a transformer's mixed precision opens autocast with, also for code that opens it without
    one (thinc's begin_update); restored after, and nothing on the CPU. No GPU needed: a cuda device object."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    expected = torch.bfloat16 if bf16 else torch.float16
    cuda, before = torch.device("cuda"), torch.get_autocast_dtype("cuda")
    assert _precision.mixed_precision_dtype(cuda) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU-only torch: "CUDA is not available. Disabling" autocast
        with _precision.mixed_precision(cuda, True):
            assert torch.get_autocast_dtype("cuda") == expected
            assert torch.autocast(device_type="cuda").fast_dtype == expected
    assert torch.get_autocast_dtype("cuda") == before
    with _precision.mixed_precision(cuda, False), _precision.mixed_precision(torch.device("cpu"), True):
        assert torch.get_autocast_dtype("cuda") == before
