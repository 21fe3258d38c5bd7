"""Every config on CUDA: trains, predicts, saves, and agrees with the CPU (pytest -m gpu).

Skipped, saying why, on machines without a CUDA GPU and CuPy (pip install 'spacy-cner[cuda]').
"""

import pytest
import spacy
from thinc.api import fix_random_seed, require_cpu

from conftest import CONFIG_NAMES, REPO_ROOT, TRAIN_DATA, make_examples, small_config_pipeline


def _cuda_ready() -> bool:
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda_ready(), reason="needs a CUDA GPU and CuPy (pip install 'spacy-cner[cuda]')"),
]
TEXTS = ["张三去了上海", "我在北京市工作", "", "李四 在 深圳。王五在广州"]


def entities(nlp, texts=TEXTS):
    return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]


def assert_scores_or_none(nlp):
    """Entity probabilities in [0, 1] where the pipe keeps them (spans_key); none where it keeps no span group
    (the student config: spans_key null, Viterbi only)."""
    ner = nlp.get_pipe("crf_ner")
    if ner.spans_key is not None:
        scores = [doc.spans[ner.spans_key].attrs["scores"] for doc in nlp.pipe(TEXTS) if len(doc)]
        assert scores and all(((s >= 0) & (s <= 1)).all() for s in scores)
    else:
        assert not any(doc.spans for doc in nlp.pipe(TEXTS))


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_config_trains_and_predicts_on_gpu(name, request, tmp_path):
    import cupy
    import torch

    spacy.require_gpu(0)
    try:
        nlp = small_config_pipeline(name, request)
        ner = nlp.get_pipe("crf_ner")
        assert isinstance(ner.model.ops.xp.zeros(1), cupy.ndarray)
        crf = ner.model.get_ref("crf").shims[0]._model
        assert next(crf.parameters()).is_cuda
        fix_random_seed(0)
        examples = make_examples(nlp, TRAIN_DATA[:2])
        optimizer = nlp.resume_training()
        losses = [nlp.update(examples, sgd=optimizer)["crf_ner"] for _ in range(5)]
        assert all(torch.isfinite(torch.tensor(losses)))
        on_gpu = entities(nlp)
        assert_scores_or_none(nlp)
        nlp.to_disk(tmp_path / "model")
    finally:
        require_cpu()
    on_cpu = entities(spacy.load(tmp_path / "model"))
    assert on_cpu == on_gpu


TRANSFORMER_CONFIGS = [
    name
    for name in CONFIG_NAMES
    if "TransformerTok2Vec" in (REPO_ROOT / "configs" / f"{name}.cfg").read_text(encoding="utf8")
]


@pytest.mark.parametrize("name", TRANSFORMER_CONFIGS)
def test_mixed_precision_skips_overflowed_steps(name, request):
    """Mixed precision: the grad scaler's first scales overflow fp16 gradients (forced here with an
    initial scale of 2**40); those steps are skipped and no weight turns nan (LEBERT's adapter, inside
    the transformer, took nan gradients into its update: bench_gpu on an H100, 2026-11-26)."""
    import torch

    spacy.require_gpu(0)
    try:
        extra = {
            "vars.mixed_precision": True,
            "components.crf_ner.model.tok2vec.grad_scaler_config": {"init_scale": 2.0**40},
        }
        nlp = small_config_pipeline(name, request, extra)
        ner = nlp.get_pipe("crf_ner")
        fix_random_seed(0)
        examples = make_examples(nlp, TRAIN_DATA[:2])
        optimizer = nlp.resume_training()
        for _ in range(3):
            nlp.update(examples, sgd=optimizer)
        bad = [
            f"{node.name}.{param}"
            for node in ner.model.walk()
            for shim in node.shims
            for param, value in shim._model.named_parameters()
            if not torch.isfinite(value).all()
        ]
        bad += [
            f"{node.name}.{param}"
            for node in ner.model.walk()
            for param in node.param_names
            if node.has_param(param) and not bool(node.ops.xp.isfinite(node.get_param(param)).all())
        ]
        assert not bad, f"non-finite weights after overflowed steps: {bad}"
        assert_scores_or_none(nlp)
    finally:
        require_cpu()
