"""Pipelines pickle, so nlp.pipe(n_process=2) works under the spawn start method (macOS, Windows)."""

import pickle
import subprocess
import sys
import textwrap

import pytest
import spacy
from conftest import CONFIG_NAMES, small_config_pipeline

TEXTS = ["张三去了上海", "我在北京市工作。李四是阿里巴巴的员工", "", "腾讯总部在深圳"]


def entities(docs):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in docs]


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_saved_pipeline_pickles(name, request, tmp_path):
    small_config_pipeline(name, request).to_disk(tmp_path / "model")
    nlp = spacy.load(tmp_path / "model")
    copy = pickle.loads(pickle.dumps(nlp))
    assert entities(copy.pipe(TEXTS)) == entities(nlp.pipe(TEXTS))
    # The copy's CRF keeps the scheme's constraints and its weights.
    crf, crf_copy = (p.get_pipe("crf_ner").model.get_ref("crf").shims[0]._model for p in (nlp, copy))
    assert crf_copy.tag_names == crf.tag_names
    assert (crf_copy.transitions == crf.transitions).all()


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_initialized_pipeline_pickles_with_its_optimizer(name, request):
    """Before it is saved, as nlp.initialize leaves it (holding the optimizer and its schedules)."""
    nlp = small_config_pipeline(name, request)
    assert nlp._optimizer is not None
    copy = pickle.loads(pickle.dumps(nlp))
    assert entities(copy.pipe(TEXTS)) == entities(nlp.pipe(TEXTS))


def test_warmup_linear_gives_thincs_rates():
    from thinc.api import registry

    from spacy_cner.training.schedules import warmup_linear

    ours, thincs = warmup_linear(0.01, 5, 12), registry.schedules.get("warmup_linear.v1")(0.01, 5, 12)
    assert [next(ours) for _ in range(15)] == [next(thincs) for _ in range(15)]
    resumed = pickle.loads(pickle.dumps(ours))  # carries on from its step
    assert next(resumed) == next(ours) == next(thincs)


@pytest.mark.parametrize("name", ["default", "bert_crf"])
def test_pipe_with_two_processes_under_spawn(name, request, tmp_path):
    small_config_pipeline(name, request).to_disk(tmp_path / "model")
    script = textwrap.dedent(
        f"""
        import json, multiprocessing, spacy
        if __name__ == "__main__":
            multiprocessing.set_start_method("spawn")
            nlp = spacy.load({str(tmp_path / "model")!r})
            texts = {TEXTS!r} * 3
            ents = lambda docs: [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs]
            print(json.dumps([ents(nlp.pipe(texts, n_process=2, batch_size=2)), ents(nlp.pipe(texts))]))
        """
    )
    (tmp_path / "run.py").write_text(script, encoding="utf8")
    result = subprocess.run([sys.executable, str(tmp_path / "run.py")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    parallel, serial = spacy.util.srsly.json_loads(result.stdout.strip().splitlines()[-1])
    assert parallel == serial and len(parallel) == 3 * len(TEXTS)
