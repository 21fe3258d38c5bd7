"""crf_ner's saved weights (float16, int8 tables) and the cfg checked against them at load
(spacy_cner/pipeline/serialization.py, checks.py)."""

import json

import numpy
import pytest
import spacy
import srsly
import torch

from toy_pipe import TEXTS, load_trained, make_nlp, predictions


def test_save_weights_float16_halves_the_model_and_loads_in_float32(tmp_path):
    """save_weights "float16": every weight saved as float16 (thinc parameters and torch state dicts),
    loaded back as float32 with the rounded values; the same entities here, the probabilities within
    1e-3; the setting is kept with the pipe, and saving a loaded pipeline again gives the same bytes."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    full = len(ner.model.to_bytes())
    expected = predictions(nlp.pipe(TEXTS))
    ner.save_weights = "float16"
    nlp.to_disk(tmp_path / "half")
    assert (tmp_path / "half" / "crf_ner" / "model").stat().st_size < 0.55 * full
    loaded = spacy.load(tmp_path / "half")
    ner16 = loaded.get_pipe("crf_ner")
    assert ner16.save_weights == "float16"
    pairs = [(a, b) for a, b in zip(ner.model.walk(), ner16.model.walk())]
    for a, b in pairs:
        for name in a.param_names:
            if a.has_param(name):
                value = b.get_param(name)
                assert value.dtype == numpy.float32
                numpy.testing.assert_array_equal(value, a.get_param(name).astype(numpy.float16).astype(numpy.float32))
        for shim_a, shim_b in zip(a.shims, b.shims):
            for (key, ta), tb in zip(shim_a._model.state_dict().items(), shim_b._model.state_dict().values()):
                assert tb.dtype == ta.dtype, key
                if ta.dtype == torch.float32:
                    torch.testing.assert_close(tb, ta.half().float(), rtol=0, atol=0)
    found = predictions(loaded.pipe(TEXTS))
    assert [doc["ents"] for doc in found] == [doc["ents"] for doc in expected]
    for doc, other in zip(found, expected):
        for span, other_span in zip(doc["spans"], other["spans"]):
            assert span[:3] == other_span[:3] and abs(span[3] - other_span[3]) < 1e-3
    loaded.to_disk(tmp_path / "again")
    assert (tmp_path / "again/crf_ner/model").read_bytes() == (tmp_path / "half/crf_ner/model").read_bytes()
    # Back to float32: the (rounded) weights as they are.
    ner16.save_weights = "float32"
    assert len(ner16.model.to_bytes()) == full
    with pytest.raises(ValueError, match="save_weights must be one of"):
        ner.save_weights = "int8"  # only the tables can be: "int8-tables"
    with pytest.raises(ValueError, match="save_weights must be one of"):
        spacy.blank("zh").add_pipe("crf_ner", config={"save_weights": "float64"})


def test_save_weights_int8_tables(tmp_path):
    """save_weights "int8-tables": the embedding tables in int8, each row scaled by its largest
    magnitude / 127, every other weight in float16; loaded back in float32. Each table entry is
    off by at most half its row's step, the model file is smaller than float16's, and saving the
    loaded pipeline again gives the same bytes."""
    from spacy_cner.pipeline.serialization import TABLE_LAYERS

    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.save_weights = "float16"
    half = len(ner.model.to_bytes())
    ner.save_weights = "int8-tables"
    nlp.to_disk(tmp_path / "int8")
    assert (tmp_path / "int8" / "crf_ner" / "model").stat().st_size < 0.75 * half
    loaded = spacy.load(tmp_path / "int8")
    ner8 = loaded.get_pipe("crf_ner")
    assert ner8.save_weights == "int8-tables"
    tables = 0
    for a, b in zip(ner.model.walk(), ner8.model.walk()):
        for name in a.param_names:
            if not a.has_param(name):
                continue
            before, after = a.get_param(name), b.get_param(name)
            assert after.dtype == numpy.float32
            if a.name in TABLE_LAYERS and name == "E":
                tables += 1
                step = numpy.abs(before).max(axis=1, keepdims=True) / 127
                assert (numpy.abs(after - before) <= step / 2 + 1e-7).all()
                numpy.testing.assert_allclose(after / step, numpy.rint(after / step), atol=1e-3)
            else:
                numpy.testing.assert_array_equal(after, before.astype(numpy.float16).astype(numpy.float32))
    assert tables >= 2  # the character and bigram tables
    assert len(predictions(loaded.pipe(TEXTS))) == len(TEXTS)
    loaded.to_disk(tmp_path / "again")
    assert (tmp_path / "again/crf_ner/model").read_bytes() == (tmp_path / "int8/crf_ner/model").read_bytes()


def test_save_weights_float16_with_a_transformer(request, tmp_path):
    """The transformer's weights (torch.save in its shim's bytes) are saved in float16 too."""
    from conftest import small_config_pipeline

    from spacy_cner.pipeline.serialization import _float16_shim

    nlp = small_config_pipeline("bert_crf", request)
    ner = nlp.get_pipe("crf_ner")
    full = len(ner.model.to_bytes())
    ner.save_weights = "float16"
    nlp.to_disk(tmp_path)
    assert (tmp_path / "crf_ner" / "model").stat().st_size < 0.6 * full
    loaded = spacy.load(tmp_path).get_pipe("crf_ner")
    assert {p.dtype for node in loaded.model.walk() for shim in node.shims for p in shim._model.parameters()} == {
        torch.float32
    }
    assert [
        [(e.start, e.end, e.label_) for e in doc.ents] for doc in loaded.pipe([nlp.make_doc(t) for t in TEXTS])
    ] == [[(e.start, e.end, e.label_) for e in doc.ents] for doc in ner.pipe([nlp.make_doc(t) for t in TEXTS])]
    with pytest.raises(ValueError, match="set crf_ner's save_weights to 'float32'"):
        _float16_shim(srsly.msgpack_dumps({"config": {}, "state": b"not torch"}))


@pytest.mark.parametrize(
    "edit",
    [
        {"scheme": "BIO"},  # over a BIOES model: fewer tags
        {"labels": ["LOC", "PER"]},  # a label removed
        {"labels": ["LOC", "ORG", "PERSON"]},  # a label renamed: as many tags, other names
    ],
)
def test_cfg_that_disagrees_with_the_weights_is_refused(edit, tmp_path):
    nlp = load_trained("BIOES")
    assert nlp.get_pipe("crf_ner").labels == ("LOC", "ORG", "PER")
    nlp.to_disk(tmp_path)
    cfg_path = tmp_path / "crf_ner" / "cfg"
    srsly.write_json(cfg_path, {**srsly.read_json(cfg_path), **edit})
    with pytest.raises(ValueError, match=f"{cfg_path}.*do not belong together"):
        spacy.load(tmp_path)
    ner_bytes = srsly.msgpack_loads(nlp.get_pipe("crf_ner").to_bytes())
    ner_bytes["cfg"] = srsly.json_dumps({**srsly.json_loads(ner_bytes["cfg"]), **edit})
    with pytest.raises(ValueError, match="the cfg in the bytes"):
        make_nlp().get_pipe("crf_ner").from_bytes(srsly.msgpack_dumps(ner_bytes))


@pytest.mark.parametrize(
    "edit",
    [
        {"temperature": "hot"},
        {"temperature": float("nan")},
        {"temperature": 0},
        {"fitted_threshold": 2.0},
        {"fitted_threshold": -0.1},
        {"fitted_threshold": True},
        {"threshold_chosen": "false"},  # issue 85: a string (truthy) decoded "auto" at the threshold
        {"threshold_chosen": 1},
    ],
)
def test_cfg_with_an_impossible_calibration_is_refused(edit, tmp_path):
    nlp = load_trained("BIOES")
    nlp.to_disk(tmp_path)
    cfg_path = tmp_path / "crf_ner" / "cfg"
    cfg = {**srsly.read_json(cfg_path), **edit}
    cfg_path.write_text(json.dumps(cfg), encoding="utf8")  # json writes NaN, as a hand edit could
    key = next(iter(edit))
    refusal = "is not valid JSON" if edit[key] != edit[key] else key  # srsly reads no NaN: the file is named
    with pytest.raises(ValueError, match=f"{cfg_path}.*{refusal}"):
        spacy.load(tmp_path)
    srsly.write_json(cfg_path, {**cfg, key: None})  # null: not fitted, loads
    spacy.load(tmp_path)


def test_loading_into_an_already_loaded_pipeline():
    """from_bytes into a pipeline that already has its weights (the CRF's masks registered) works."""
    nlp = load_trained()
    expected = predictions(nlp.pipe(TEXTS))
    nlp.from_bytes(nlp.to_bytes())
    assert predictions(nlp.pipe(TEXTS)) == expected
