"""spacy-cner.LacFeatures.v1 on a fabricated LAC sdist (tests/fake_lac.py): the features are lac_net's outputs for
the same text (alone and in a padded batch), positions by brute force, windows, word tokens, the projection, the
cache for FGM's second pass, save/load offline; and configs/lac_context.cfg trained on it."""

import pickle
import shutil
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Config

from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.lac_features import POSITIONS
from spacy_cner.pretrained.lac_analyzer import length_groups
from spacy_cner.long_docs import split_windows
from spacy_cner.pretrained.lac import open_lac
from spacy_cner.pretrained.lac_analyzer import tagger_from_sdist

from conftest import REPO_ROOT, train_from_config, write_corpus
from fake_lac import HIDDEN, TAGS

TEXTS = ["张三去了北京市工作", "", "上海", "阿里巴巴的员工 在 中国。李四住在广州！王五", "萬１ab首都", "京"]


def make_layer(**settings):
    block = "".join(
        f"{key} = {value if isinstance(value, str) else str(value).lower()}\n" for key, value in settings.items()
    )
    return registry.resolve(Config().from_str(f'[m]\n@layers = "spacy-cner.LacFeatures.v1"\n{block}'))["m"]


def initialized(sdist, docs=None, **settings):
    layer = make_layer(sdist=f'"{sdist}"', **settings)
    layer.initialize(X=docs if docs is not None else make_docs())
    return layer


def make_docs(texts=TEXTS):
    nlp = spacy.blank("zh")
    return [nlp.make_doc(text) for text in texts]


def reference_chars(tagger, text):
    """Per character: lac_net's top states and emission scores of the id covering it (the text run alone, unpadded),
    and its position in that id's word by brute force."""
    ids, lengths = tagger.ids(text)
    with torch.no_grad():
        states, scores = tagger.network.encode(torch.tensor([ids], dtype=torch.long), torch.tensor([len(ids)]))
    features = torch.cat([states, scores], dim=-1)[0].numpy()
    rows = []
    for unit, length in enumerate(lengths):
        for offset in range(length):
            if length == 1:
                position = "S"
            elif offset == 0:
                position = "B"
            elif offset == length - 1:
                position = "E"
            else:
                position = "M"
            rows.append(numpy.concatenate([features[unit], numpy.eye(4)[POSITIONS.index(position)]]))
    return numpy.asarray(rows, dtype="float32") if rows else numpy.zeros((0, features.shape[1] + 4), dtype="float32")


def per_token(chars, doc):
    """Rows per character as rows per token: the mean over its characters, zeros for whitespace."""
    return numpy.asarray(
        [
            numpy.zeros(chars.shape[1]) if token.is_space else chars[token.idx : token.idx + len(token)].mean(axis=0)
            for token in doc
        ],
        dtype="float32",
    ).reshape(len(doc), chars.shape[1])


def test_features_are_lac_nets_outputs_with_positions_alone_and_batched(fake_lac_sdist):
    layer = initialized(fake_lac_sdist, sentences=False)
    tagger = tagger_from_sdist(open_lac(fake_lac_sdist))
    docs = make_docs()
    assert layer.get_dim("nO") == 2 * HIDDEN + TAGS + 4
    batched = layer.predict(docs)
    for doc, features in zip(docs, batched):
        expected = per_token(reference_chars(tagger, doc.text), doc)
        assert features.shape == (len(doc), layer.get_dim("nO"))
        numpy.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-6)
        (alone,) = layer.predict([doc])
        numpy.testing.assert_allclose(alone, features, rtol=1e-5, atol=1e-6)
    # 阿里巴巴 is one id of four characters: B M M E; 北京市 one of three; 去了 two ids (not in the vocabulary).
    positions = ["".join(POSITIONS[i] for i in f[:, -4:].argmax(axis=1)) for f in batched]
    assert positions[0] == "BE" + "SS" + "BME" + "BE" and positions[3][:4] == "BMME"
    assert all(((f[:, -4:] == 1).sum(axis=1) == 1).all() for f in batched)


def test_hidden_or_emissions_alone_are_their_columns(fake_lac_sdist):
    both = initialized(fake_lac_sdist).predict(make_docs())
    states = initialized(fake_lac_sdist, emissions=False).predict(make_docs())
    scores = initialized(fake_lac_sdist, hidden=False).predict(make_docs())
    for a, h, e in zip(both, states, scores):
        numpy.testing.assert_allclose(h, numpy.hstack([a[:, : 2 * HIDDEN], a[:, -4:]]), rtol=1e-6)
        numpy.testing.assert_allclose(e, a[:, 2 * HIDDEN :], rtol=1e-6)
    with pytest.raises(ValueError, match="hidden and emissions are both false"):
        make_layer(hidden=False, emissions=False)


def test_each_sentence_and_window_is_read_alone(fake_lac_sdist):
    """sentences: each sentence's features are those of the sentence alone; a sentence longer than window_size
    in overlapping windows, each character from the window split_windows gives it."""
    tagger = tagger_from_sdist(open_lac(fake_lac_sdist))
    (doc,) = make_docs([TEXTS[3]])
    (features,) = initialized(fake_lac_sdist).predict([doc])
    parts = ["阿里巴巴的员工 在 中国。", "李四住在广州！", "王五"]
    expected = per_token(numpy.vstack([reference_chars(tagger, part) for part in parts]), doc)
    numpy.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-6)
    long_text = "张三去了北京市工作上海阿里巴巴的员工"
    (windowed,) = initialized(fake_lac_sdist, window_size=6).predict(make_docs([long_text]))
    windows = split_windows([], len(long_text), 6)
    assert len(windows) > 2 and windows[1].start < windows[0].end  # overlapping
    for window in windows:
        own = reference_chars(tagger, long_text[window.start : window.end])[
            window.own_start - window.start : window.own_end - window.start
        ]
        numpy.testing.assert_allclose(windowed[window.own_start : window.own_end], own, rtol=1e-5, atol=1e-6)


def test_a_word_token_gets_the_mean_of_its_characters(fake_lac_sdist):
    layer = initialized(fake_lac_sdist)
    vocab = spacy.blank("zh").vocab
    words = Doc(vocab, words=["张三", "去了", "北京市", " ", "工作"], spaces=[False, False, False, False, False])
    chars = reference_chars(tagger_from_sdist(open_lac(fake_lac_sdist)), words.text)
    (by_word,) = layer.predict([words])
    bounds = [(0, 2), (2, 4), (4, 7), None, (8, 10)]
    for row, span in zip(by_word, bounds):
        expected = numpy.zeros_like(row) if span is None else chars[span[0] : span[1]].mean(axis=0)
        numpy.testing.assert_allclose(row, expected, rtol=1e-6, atol=1e-7)


def test_the_projection_is_fixed_principal_directions(fake_lac_sdist):
    docs = make_docs()
    full = initialized(fake_lac_sdist, docs=docs)
    projected = initialized(fake_lac_sdist, docs=docs, projected_width=4)
    P = projected.get_param("P")
    assert P.shape == (2 * HIDDEN + TAGS, 4) and projected.get_dim("nO") == 8
    numpy.testing.assert_allclose(P.T @ P, numpy.eye(4), atol=1e-5)  # orthonormal directions
    for a, p in zip(full.predict(docs), projected.predict(docs)):
        numpy.testing.assert_allclose(p[:, :4], a[:, :-4] @ P, rtol=1e-4, atol=1e-5)
        numpy.testing.assert_array_equal(p[:, 4:], a[:, -4:])
    Y, backprop = projected.begin_update(docs)
    assert backprop([numpy.ones_like(y) for y in Y]) == [] and not projected.has_grad("P")
    with pytest.raises(ValueError, match="projected_width 400 is more than the 55 features"):
        initialized(fake_lac_sdist, projected_width=400)
    with pytest.raises(ValueError, match="needs sample docs with text"):
        initialized(fake_lac_sdist, docs=make_docs([""]), projected_width=4)


def test_training_passes_reuse_the_last_batch_and_predict_does_not_keep_it(fake_lac_sdist):
    layer = initialized(fake_lac_sdist)
    docs = make_docs()
    first, _ = layer.begin_update(docs)
    calls = []
    module = torch_module(layer)
    encode = module.encode
    module.encode = lambda *args: calls.append(1) or encode(*args)
    second, _ = layer.begin_update(make_docs())  # the same texts: FGM's second pass
    assert not calls and all(numpy.array_equal(a, b) for a, b in zip(first, second))
    layer.begin_update(make_docs(["北京"]))
    layer.predict(docs)
    layer.predict(docs)
    assert len(calls) == 3


def test_training_computes_each_window_once_and_prediction_always(fake_lac_sdist):
    """In training a window's features come from the cache the second time (no network call), equal to computing
    them afresh; prediction never reads or fills it; a full cache keeps what it has; initialize empties it."""
    docs = make_docs()
    fresh = initialized(fake_lac_sdist, train_cache_mb=0)
    layer = initialized(fake_lac_sdist)
    cache = layer.attrs["train_cache"]
    module = torch_module(layer)
    encode, calls = module.encode, []
    module.encode = lambda sequences, *args: calls.append(len(sequences)) or encode(sequences, *args)
    layer.predict(docs)
    assert len(cache) == 0 and len(calls) == 1
    first, _ = layer.begin_update(docs)
    assert calls[-1] == 7 and len(cache) == 7  # TEXTS[3] is three sentences (windows), "" none
    # Windows already seen (王五, 李四住在广州！, 京), in other docs and batches: no network call for them.
    mixed = make_docs(["王五", "李四住在广州！北京", "京"])
    out, _ = layer.begin_update(mixed)
    assert calls[-1] == 1  # only 北京 is new
    for got, expected in zip(out, fresh.begin_update(mixed)[0]):  # other batches: equal up to the products' rounding
        numpy.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    n_calls = len(calls)
    again, _ = layer.begin_update(make_docs(list(reversed(TEXTS))))  # the next epoch, in another order
    assert len(calls) == n_calls
    for got, expected in zip(again, reversed(first)):
        numpy.testing.assert_array_equal(got, expected)
    layer.predict(docs)
    assert len(calls) == n_calls + 1
    # Full: nothing more goes in, the features are still right.
    small = initialized(fake_lac_sdist, train_cache_mb=1)
    small.attrs["train_cache"].max_bytes = small.attrs["train_cache"].n_bytes + 1
    out, _ = small.begin_update(mixed)
    assert len(small.attrs["train_cache"]) == 0
    for got, expected in zip(out, fresh.begin_update(mixed)[0]):
        numpy.testing.assert_array_equal(got, expected)
    layer.initialize(X=docs)
    assert len(cache) == 0 and cache.n_bytes == 0
    # Other weights loaded into the layer: the cache is emptied, the features are the new weights'.
    layer.begin_update(docs)
    other = initialized(fake_lac_sdist, train_cache_mb=0)
    with torch.no_grad():
        for tensor in torch_module(other).network.parameters():
            tensor.mul_(0.5)
    layer.from_bytes(other.to_bytes())
    for got, expected in zip(layer.begin_update(docs)[0], other.begin_update(docs)[0]):
        numpy.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="train_cache_mb must be >= 0"):
        make_layer(train_cache_mb=-1)


def test_save_load_and_pickle_need_no_sdist(fake_lac_sdist, tmp_path):
    layer = initialized(fake_lac_sdist, projected_width=5)
    docs = make_docs()
    expected = layer.predict(docs)
    saved = layer.to_bytes()
    layer.begin_update(docs)  # fills the training cache, which is not saved or pickled
    assert len(layer.attrs["train_cache"]) and layer.to_bytes() == saved
    assert len(pickle.loads(pickle.dumps(layer)).attrs["train_cache"]) == 0
    fresh = make_layer(projected_width=5, sdist=f'"{tmp_path / "nowhere.tar.gz"}"')
    with pytest.raises(ValueError, match="LacFeatures has no weights"):
        fresh.predict(docs)
    fresh.from_bytes(layer.to_bytes())
    for a, b in zip(expected, fresh.predict(docs)):
        numpy.testing.assert_array_equal(a, b)
    for a, b in zip(expected, pickle.loads(pickle.dumps(layer)).predict(docs)):
        numpy.testing.assert_array_equal(a, b)


def test_length_groups_sort_and_bound_the_padding(monkeypatch):
    import spacy_cner.pretrained.lac_analyzer as lac_analyzer

    monkeypatch.setattr(lac_analyzer, "GROUP_IDS", 12)
    monkeypatch.setattr(lac_analyzer, "GROUP_SIZE", 3)
    monkeypatch.setattr(lac_analyzer, "GROUP_PADDING", 100.0)
    lengths = [5, 0, 1, 2, 2, 13, 3, 1]
    assert length_groups(lengths) == [[2, 7, 3], [4, 6], [0], [5]]  # by count and padded size
    monkeypatch.setattr(lac_analyzer, "GROUP_PADDING", 1.25)
    assert length_groups(lengths) == [[2, 7], [3, 4], [6, 0], [5]]  # [2, 7, 3] would pad 4 ids to 6


def test_the_lac_context_config_trains_and_loads_offline(fake_lac_sdist, tmp_path, monkeypatch):
    """configs/lac_context.cfg with LAC's vectors and tagger from one (fabricated) sdist: trains a few steps, saves
    the tagger with the pipeline (float16, save_weights), and loads and tags with no sdist at all."""
    sdist = Path(shutil.copy(fake_lac_sdist, tmp_path / "LAC-2.1.2.tar.gz"))  # deleted below; the fixture's is shared
    overrides = {
        **write_corpus(tmp_path),
        "paths.lac_sdist": str(sdist),
        "training.max_steps": 4,
        "training.eval_frequency": 2,
        "training.max_epochs": 0,
        "initialize.before_init.missing": "none",
        "components.crf_ner.model.tok2vec.width": 16,
        "components.crf_ner.model.encoder.width": 16,
    }
    train_from_config(REPO_ROOT / "configs" / "lac_context.cfg", tmp_path / "out", overrides)
    tagger = tagger_from_sdist(open_lac(sdist))
    sdist.unlink()
    monkeypatch.setattr("spacy_cner.pretrained.fetch.find_url", lambda sdist: pytest.fail("looked for the sdist"))
    nlp = spacy.load(tmp_path / "out" / "model-last")
    (layer,) = [node for node in nlp.get_pipe("crf_ner").model.walk() if node.name == "lac_features"]
    doc = nlp("张三去了北京市工作")
    (features,) = layer.predict([doc])
    numpy.testing.assert_allclose(features, reference_chars(tagger, doc.text), rtol=1e-2, atol=1e-2)  # float16 weights
    spans = [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(["上海", doc.text], batch_size=2)]
    assert spans[1] == [(e.start, e.end, e.label_) for e in doc.ents]
