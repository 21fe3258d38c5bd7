"""crf_ner's decoding (spacy_cner/pipeline/decoding.py): entities set before it, long docs in windows,
entity probabilities in doc.spans and decoding at a threshold."""

import numpy
import pytest
import spacy
from numpy.testing import assert_allclose
from spacy.tokens import Doc, DocBin, Span

from conftest import TRAIN_DATA
from toy_pipe import HELD_OUT, TEXTS, load_trained, predictions, scored
from spacy_cner.pipeline import decoding
from spacy_cner.tags import SCHEMES, is_valid_sequence, most_probable_spans, preset_constraints
from spacy_cner.long_docs import doc_windows


# Entities set before crf_ner


@pytest.mark.parametrize("scheme", SCHEMES)
def test_entity_ruler_before(scheme):
    """Pre-set entities are kept exactly, known label or not, and predicted around."""
    nlp = load_trained(scheme)
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    # The model predicts 北京市 and 上海 as LOC: the ruler sets a shorter LOC and
    # a label the model does not know.
    ruler.add_patterns([{"label": "LOC", "pattern": "北京"}, {"label": "GPE", "pattern": "上海"}])
    doc = nlp("我在北京市工作")
    assert [(ent.text, ent.start, ent.end, ent.label_) for ent in doc.ents if ent.start < 4] == [("北京", 2, 4, "LOC")]
    assert [token.ent_iob_ for token in doc][:4] == ["O", "O", "B", "I"]
    # 市 may start a new entity but must not extend the pre-set one.
    assert doc[4].ent_iob_ != "I"
    doc = nlp("张三去了上海")
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("张三", "PER"), ("上海", "GPE")]
    assert [token.ent_iob_ for token in doc] == ["B", "I", "O", "O", "B", "I"]
    assert [token.ent_type_ for token in doc] == ["PER", "PER", "", "", "GPE", "GPE"]


def test_every_entity_has_its_score_and_keeps_it_saved():
    """ent._.score for every doc.ents entity (an entity_ruler's unknown label: 1, and in the span
    group too, where the README's idiom used to fail), kept by to_bytes, DocBin and to_json."""
    from spacy.tokens import DocBin

    nlp = load_trained()
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    ruler.add_patterns([{"label": "APP", "pattern": "微信"}])
    doc = nlp("张三去了上海用微信")
    ents = [(ent.text, ent.label_) for ent in doc.ents]
    assert ("微信", "APP") in ents and ("张三", "PER") in ents
    group = doc.spans["crf_ner"]
    in_group = dict(zip([(s.start, s.end, s.label_) for s in group], group.attrs["scores"].tolist()))
    for ent in doc.ents:
        assert isinstance(ent._.score, float) and 0.0 < ent._.score <= 1.0
        assert in_group[(ent.start, ent.end, ent.label_)] == pytest.approx(ent._.score, abs=1e-6)
    assert [ent._.score for ent in doc.ents if ent.label_ == "APP"] == [1.0]
    scores = [ent._.score for ent in doc.ents]
    assert [ent._.score for ent in Doc(nlp.vocab).from_bytes(doc.to_bytes()).ents] == scores
    (loaded,) = DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab)
    assert [ent._.score for ent in loaded.ents] == scores
    as_json = doc.to_json(underscore=["score"])["underscore_span"]["score"]
    assert sorted((item["start"], item["end"], item["value"]) for item in as_json) == sorted(
        (ent.start_char, ent.end_char, ent._.score) for ent in doc.ents
    )


def test_a_span_a_later_ruler_relabels_has_no_crf_score():
    """An entity_ruler after crf_ner (overwrite_ents) relabelling a span crf_ner found: ent._.score kept
    crf_ner's probability for the other label (spaCy keys span values by characters only); it is None
    now, as it is in the span group's scores, and the span crf_ner left alone keeps its score."""

    nlp = load_trained()
    doc = nlp("张三去了上海")
    found = {(ent.start_char, ent.end_char): (ent.label_, ent._.score) for ent in doc.ents}
    assert found[(0, 2)][0] == "PER" and found[(4, 6)][0] == "LOC"
    ruler = nlp.add_pipe("entity_ruler", after="crf_ner", config={"overwrite_ents": True})
    ruler.add_patterns([{"label": "CITY", "pattern": "上海"}])
    doc = nlp("张三去了上海")
    scores = {(ent.start_char, ent.end_char, ent.label_): ent._.score for ent in doc.ents}
    assert scores == {(0, 2, "PER"): found[(0, 2)][1], (4, 6, "CITY"): None}
    assert [ent._.score for ent in Doc(nlp.vocab).from_bytes(doc.to_bytes()).ents] == [found[(0, 2)][1], None]


def test_a_ruler_entity_with_an_id_is_in_the_span_group_as_in_doc_ents():
    """The README's span-group loop tells entities from alternatives by `span in doc.ents`: an entity_ruler's
    span with an id (and kb_id) must be the doc's own span in the group, not a copy without them."""
    nlp = load_trained()
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    ruler.add_patterns([{"label": "APP", "pattern": "微信", "id": "wechat"}])
    doc = nlp("张三去了上海用微信")
    group = doc.spans["crf_ner"]
    (app,) = [span for span in group if span.label_ == "APP"]
    assert app.id_ == "wechat" and app in doc.ents
    assert all(ent in group for ent in doc.ents)


def test_no_scores_without_probabilities():
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.spans_key, ner.ents_threshold = None, None
    doc = nlp("张三去了上海")
    assert doc.ents and all(ent._.score is None for ent in doc.ents) and "crf_ner" not in doc.spans


@pytest.mark.parametrize("scheme", SCHEMES)
def test_preset_ents_keep_kb_id(scheme):
    """As in spaCy's ner: a pre-set entity keeps its kb_id; new ones have none."""
    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc("张三去了上海")
    doc.ents = [Span(doc, 4, 6, label="LOC", kb_id="Q8686")]
    doc = ner(doc)
    assert [(ent.text, ent.label_, ent.kb_id_) for ent in doc.ents] == [
        ("张三", "PER", ""),
        ("上海", "LOC", "Q8686"),
    ]


def test_preset_missing_and_outside_tokens():
    """Only B/I tokens are fixed: "O" and missing ones are predicted (spaCy's ner does too)."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc("张三去了上海")
    doc.set_ents([], default="outside")
    expected = [(ent.start, ent.end, ent.label_) for ent in nlp("张三去了上海").ents]
    assert [(ent.start, ent.end, ent.label_) for ent in ner(doc).ents] == expected
    doc = nlp.make_doc("张三去了上海")
    doc.set_ents([Span(doc, 4, 6, "GPE")], default="missing")
    doc = ner(doc)
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("张三", "PER"), ("上海", "GPE")]


# Long docs: tagged in windows cut after sentence ends


LONG_TEXT = "。".join(t for t, _ in TRAIN_DATA) + "！王五在深圳工作\n腾讯总部在深圳。" * 3


def char_entities(doc, offset=0):
    return [(ent.start_char + offset, ent.end_char + offset, ent.label_) for ent in doc.ents]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_long_doc_is_tagged_as_its_windows(scheme):
    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = 12
    doc = nlp.make_doc(LONG_TEXT)
    windows = doc_windows(doc, 12)
    assert len(windows) > 4 and all(w.start == w.own_start and w.end == w.own_end for w in windows)
    expected = []
    for w in windows:
        expected += char_entities(nlp(doc[w.start : w.end].text), doc[w.start].idx)
    assert char_entities(nlp(LONG_TEXT)) == expected
    assert any(label == "PER" for _, _, label in expected)
    # A doc no longer than the window is tagged whole, as with windows off.
    ner.long_doc_window = 0
    whole = [char_entities(nlp(t)) for t, _ in TRAIN_DATA]
    ner.long_doc_window = 12
    assert [char_entities(nlp(t)) for t, _ in TRAIN_DATA] == whole


def test_a_long_docs_windows_go_to_the_model_in_small_calls(monkeypatch):
    """A long doc's windows are scored WINDOW_BATCH_TOKENS tokens per model call at most (their
    activations are the peak of a long doc's memory, on top of the doc), short docs
    EMISSION_BATCH_TOKENS; the entities are those of one call per window."""
    from spacy_cner import long_docs

    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = 12
    text = "张三去了上海。李四在北京工作。" * 20
    expected = [(e.start, e.end, e.label_) for e in nlp(text).ents]
    calls = []
    predict = type(ner.model).predict
    monkeypatch.setattr(
        type(ner.model), "predict", lambda model, docs: calls.append(sum(map(len, docs))) or predict(model, docs)
    )
    monkeypatch.setattr(long_docs, "WINDOW_BATCH_TOKENS", 30)
    monkeypatch.setattr(long_docs, "EMISSION_BATCH_TOKENS", 1000)
    assert [(e.start, e.end, e.label_) for e in nlp(text).ents] == expected
    assert len(calls) > 5 and max(calls) <= 30
    calls.clear()
    list(nlp.pipe(["张三去了上海。"] * 40))
    assert max(calls) > 30  # short docs: EMISSION_BATCH_TOKENS per call


@pytest.mark.parametrize("scheme", SCHEMES)
def test_long_sentence_gets_valid_tags_from_overlapping_windows(scheme):
    nlp = load_trained(scheme)
    nlp.get_pipe("crf_ner").long_doc_window = 6
    nlp.get_pipe("crf_ner").ents_threshold = None  # the best path: tag ids to check
    text = "".join(t for t, _ in TRAIN_DATA)  # no sentence end: one long sentence
    doc = nlp(text)
    ner = nlp.get_pipe("crf_ner")
    tags = ner.predict([nlp.make_doc(text)]).tag_ids[0].tolist()
    assert is_valid_sequence(tags, ner.tag_names)
    assert len(doc.ents) >= 3
    assert predictions(nlp.pipe([text, "张三去了上海", text], batch_size=3))[0] == predictions([doc])[0]


def test_long_doc_in_a_batch_equals_apart():
    nlp = load_trained()
    nlp.get_pipe("crf_ner").long_doc_window = 10
    texts = ["张三去了上海", LONG_TEXT, "", "李四是阿里巴巴的员工", LONG_TEXT[:9]]
    apart = predictions([nlp(t) for t in texts])
    assert predictions(nlp.pipe(texts, batch_size=len(texts))) == apart


def test_long_doc_keeps_a_preset_entity_across_a_sentence_end():
    nlp = load_trained()
    nlp.get_pipe("crf_ner").long_doc_window = 8
    nlp.get_pipe("crf_ner").ents_threshold = None  # the best path: tag ids to check
    doc = nlp.make_doc(LONG_TEXT)
    period = LONG_TEXT.index("。")
    doc.ents = [Span(doc, period - 2, period + 3, "ORG")]  # "工作。张三"
    tagged = nlp.get_pipe("crf_ner")(doc)
    assert (period - 2, period + 3, "ORG") in [(e.start, e.end, e.label_) for e in tagged.ents]
    ner = nlp.get_pipe("crf_ner")
    assert is_valid_sequence(ner.predict([doc]).tag_ids[0].tolist(), ner.tag_names)


def test_long_doc_window_setting():
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="long_doc_window"):
        nlp.add_pipe("crf_ner", config={"long_doc_window": 1})
    assert nlp.add_pipe("crf_ner", config={"long_doc_window": 0}).long_doc_window == 0


# Entity probabilities in doc.spans (spans_key, candidate_threshold, ents_threshold)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_spans_hold_the_entities_with_their_exact_probabilities(scheme):
    from spacy_cner.layers.crf_posteriors import span_log_probs

    nlp = load_trained(scheme)
    ner = nlp.get_pipe("crf_ner")
    texts = [t for t in TEXTS if t.strip()] + ["王五在阿里巴巴上海总部", "张三李四"]
    for doc in nlp.pipe(texts):
        found = scored(doc)
        ents = [(e.start, e.end, e.label_) for e in doc.ents]
        assert set(ents) <= set(found)
        emissions = ner.model.predict([doc])
        # The same constraints as decoding: no entity starts on whitespace.
        (allowed,) = preset_constraints(nlp.make_doc(doc.text), [(0, len(doc))], ner.tag_set)
        masks = None if allowed is None else [allowed]
        exact = span_log_probs(ner.model.get_ref("crf"), emissions, [list(found)], scheme, masks)[0]
        assert_allclose([found[span] for span in found], numpy.exp(exact), rtol=1e-5, atol=1e-6)
        assert all(found[span] >= 0.1 for span in found if span not in ents)
    doc = nlp("我在北京市工作")
    assert scored(doc)[(2, 5, "LOC")] > 0.5


def test_scoring_settings():
    nlp = load_trained()
    text = "王五在阿里巴巴上海总部，张三李四"
    with_scores = nlp(text)
    probabilities = {
        (e.start, e.end, e.label_): scored(with_scores)[(e.start, e.end, e.label_)] for e in with_scores.ents
    }
    assert len(probabilities) >= 2
    ner = nlp.get_pipe("crf_ner")
    ner.spans_key = None
    plain = nlp(text)
    assert "crf_ner" not in plain.spans
    assert [e.text for e in plain.ents] == [e.text for e in with_scores.ents]
    # ents_threshold leaves out the predicted entities below it, whatever spans_key is.
    # Halfway between two entities' probabilities: an entity right at the threshold would be
    # kept or not by the last bit of a recomputed float.
    values = sorted(probabilities.values())
    cut = (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    ner.ents_threshold = cut
    kept = {(e.start, e.end, e.label_) for e in nlp(text).ents}
    assert kept == {span for span, p in probabilities.items() if p >= cut}
    assert kept and kept != set(probabilities)
    ner.spans_key, ner.candidate_threshold, ner.ents_threshold = "scores", 1.5, None
    only_ents = nlp(text)
    assert set(scored(only_ents, "scores")) == set(probabilities)
    for bad in (
        {"candidate_threshold": 0},
        {"candidate_threshold": 0.0001},
        {"ents_threshold": 1.5},
        {"ents_threshold": 0},
    ):
        with pytest.raises(ValueError, match=list(bad)[0]):
            spacy.blank("zh").add_pipe("crf_ner", config=bad)


def test_scores_survive_docbin_and_preset_entities_are_sure():
    nlp = load_trained()
    doc = nlp.make_doc("张三在北京市工作")
    doc.ents = [Span(doc, 3, 6, "ORG")]  # pre-set, against the model's LOC
    doc = nlp.get_pipe("crf_ner")(doc)
    assert scored(doc)[(3, 6, "ORG")] == pytest.approx(1.0)
    restored = list(DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab))[0]
    assert scored(restored) == scored(doc)


def test_ents_threshold_decodes_the_most_probable_spans():
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.cfg["temperature"] = 6.0  # flat probabilities: many spans between 0.1 and 1/2
    texts = [t for t in TEXTS if t.strip()] + [text for text, _ in HELD_OUT]
    # The default, "fitted", decodes the best path until a threshold is fitted.
    assert ner.ents_threshold == "fitted" and ner.entity_threshold is None
    best = [p["ents"] for p in predictions(nlp.pipe(texts))]
    ner.ents_threshold = None
    assert [p["ents"] for p in predictions(nlp.pipe(texts))] == best
    ner.ents_threshold = 0.15
    decoded = [nlp(text) for text in texts]
    for doc in decoded:
        ents = [(e.start, e.end, e.label_) for e in doc.ents]
        assert ents == most_probable_spans(scored(doc), 0.15)
    assert [p["ents"] for p in predictions(decoded)] != best
    # The same entities without the span group; a threshold below candidate_threshold
    # scores the spans it needs, and the group still shows those above candidate_threshold.
    ner.spans_key = None
    assert [p["ents"] for p in predictions(nlp.pipe(texts))] == [p["ents"] for p in predictions(decoded)]
    ner.spans_key, ner.candidate_threshold, ner.ents_threshold = "crf_ner", 0.3, 0.15
    for doc, before in zip(nlp.pipe(texts), decoded):
        assert [(e.start, e.end, e.label_) for e in doc.ents] == [(e.start, e.end, e.label_) for e in before.ents]
        ents = {(e.start, e.end, e.label_) for e in doc.ents}
        assert all(p >= 0.3 or span in ents for span, p in scored(doc).items())
    # Pre-set entities are kept, and the spans around them decoded as before.
    doc = nlp.make_doc("张三在北京市工作")
    doc.ents = [Span(doc, 3, 6, "ORG")]
    assert (3, 6, "ORG") in {(e.start, e.end, e.label_) for e in ner(doc).ents}


@pytest.mark.parametrize("long_doc_window", [0, 8])
def test_threshold_decoding_skips_the_best_path(monkeypatch, long_doc_window):
    """doc.ents at a threshold need only the probabilities: no Viterbi pass, and the entities
    are the most probable spans of the probabilities scored beside the best path (long docs
    decoded in windows too)."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    ner.long_doc_window = long_doc_window
    texts = [t for t in TEXTS if t.strip()] + [text for text, _ in HELD_OUT] + [LONG_TEXT]
    ner.ents_threshold = 0.2
    docs = [nlp.make_doc(text) for text in texts]
    scored = ner._span_scores(len(docs), ner._decode(docs, best_path=True), 0.1, ner.cfg.get("temperature", 1.0))
    expected = [most_probable_spans(doc_scores, 0.2) for doc_scores in scored]
    assert any(expected)
    calls = []
    original = decoding.crf_decode
    monkeypatch.setattr(decoding, "crf_decode", lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    assert ner.predict(docs[:1]).tag_ids is None
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)] == expected
    assert not calls
    ner.ents_threshold = None
    nlp(texts[0])
    assert calls


def test_set_annotations_decodes_as_predict_did():
    """A tagging keeps its decoding: set_annotations does not read a threshold changed since."""
    nlp = load_trained()
    ner = nlp.get_pipe("crf_ner")
    doc = nlp.make_doc(TEXTS[0])
    ner.ents_threshold = 0.2
    at_threshold = ner.predict([doc])
    ner.ents_threshold = None
    best_path = ner.predict([doc])
    ner.ents_threshold = 0.2
    ner.set_annotations([doc], best_path)
    assert doc.ents
    ner.ents_threshold = None
    ner.set_annotations([doc], at_threshold)
    assert [(e.start, e.end, e.label_) for e in doc.ents] == most_probable_spans(at_threshold.scores[0], 0.2)
