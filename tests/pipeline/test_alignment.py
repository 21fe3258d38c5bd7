"""A character crf_ner on docs of longer tokens (spacy_cner/pipeline/alignment.py): word-segmented docs,
misaligned gold, jieba and pkuseg pipelines."""

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import fix_random_seed

from toy_pipe import load_trained, make_nlp, train
from spacy_cner.tags import SCHEMES


# Word tokens and misaligned gold


WORD_DATA = [
    (["我", "在", "北京市", "工作"], ["O", "O", "U-LOC", "O"]),
    (["张三", "去了", "上海"], ["U-PER", "O", "U-LOC"]),
    (["李四", "是", "阿里巴巴", "的", "员工"], ["U-PER", "O", "U-ORG", "O", "O"]),
]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_word_segmented_docs(scheme):
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    examples = [Example.from_dict(Doc(nlp.vocab, words=words), {"entities": tags}) for words, tags in WORD_DATA]
    train(nlp, examples, n_steps=30)
    ner = nlp.get_pipe("crf_ner")
    doc = ner(Doc(nlp.vocab, words=["我", "在", "北京市", "工作"]))
    assert [(ent.start, ent.end, ent.text, ent.label_) for ent in doc.ents] == [(2, 3, "北京市", "LOC")]
    assert [token.ent_iob_ for token in doc] == ["O", "O", "B", "O"]
    docs = list(ner.pipe([Doc(nlp.vocab, words=words) for words, _ in WORD_DATA], batch_size=2))
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    assert [len(doc.ents) for doc in docs] == [1, 2, 2]


def test_misaligned_gold():
    fix_random_seed(0)
    nlp = make_nlp()
    ner = nlp.get_pipe("crf_ner")
    predicted = Doc(nlp.vocab, words=["我在", "北京", "市工作"])
    misaligned = Example.from_dict(
        predicted, {"words": ["我", "在", "北京市", "工作"], "entities": ["O", "O", "U-LOC", "O"]}
    )
    # Gold that is not one-to-one with the predicted tokens is missing there.
    assert misaligned.get_aligned_ner() == ["O", None, None]
    # Characters predicted, words in the gold: the entity still aligns.
    chars = Example.from_dict(
        nlp.make_doc("张三去了上海"),
        {"words": ["张三", "去了", "上海"], "entities": ["U-PER", "O", "U-LOC"]},
    )
    assert chars.get_aligned_ner() == ["B-PER", "L-PER", "O", "O", "B-LOC", "L-LOC"]
    examples = [misaligned, chars]
    optimizer = nlp.initialize(get_examples=lambda: examples)
    assert ner.labels == ("LOC", "PER")
    for _ in range(2):
        losses = nlp.update(examples, sgd=optimizer)
        assert numpy.isfinite(losses["crf_ner"])
    scores = nlp.evaluate(examples)
    assert "ents_f" in scores


# A character model in a word-segmented pipeline


def word_pipeline(segmenter: str, **settings) -> spacy.Language:
    """The trained character pipeline's crf_ner in a pipeline with another segmenter."""
    trained = load_trained()
    nlp = spacy.blank(
        "zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.zh.ChineseTokenizer", "segmenter": segmenter}}}
    )
    nlp.add_pipe("crf_ner", source=trained)
    ner = nlp.get_pipe("crf_ner")
    for key, value in settings.items():
        setattr(ner, key, value)
    return nlp


def test_a_character_model_tags_jieba_docs_on_their_characters():
    pytest.importorskip("jieba", reason="needs jieba (the test extra installs it)")
    chars = load_trained()
    nlp = word_pipeline("jieba")
    assert nlp.get_pipe("crf_ner").cfg["token_unit"] == "char"
    text = "张三去了上海，李四是阿里巴巴的员工"
    doc = nlp(text)
    assert any(len(token) > 1 for token in doc)  # jieba's words
    found = [(e.start_char, e.end_char, e.label_) for e in chars(text).ents]
    assert len(found) >= 3
    # The character model's entities, grown to the words they touch ("expand").
    expected = [
        (s.start_char, s.end_char, label)
        for s, label in ((doc.char_span(start, end, alignment_mode="expand"), label) for start, end, label in found)
    ]
    assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == expected
    assert sum(e == f for e, f in zip(expected, found)) >= 2  # most lie on jieba's word boundaries
    group = doc.spans["crf_ner"]
    assert {(s.start_char, s.end_char, s.label_) for s in group} >= set(expected)


def test_entities_inside_a_word_follow_the_alignment_mode():
    pytest.importorskip("jieba", reason="needs jieba (the test extra installs it)")
    text = "我在北京市工作"
    chars = load_trained()
    assert [(e.text, e.label_) for e in chars(text).ents] == [("北京市", "LOC")]
    nlp = word_pipeline("jieba")
    # Words that cut the entity: 我在北 | 京市工作 (a pre-tokenized doc).
    doc = Doc(nlp.vocab, words=["我在北", "京市工作"], spaces=[False, False])
    expanded = nlp.get_pipe("crf_ner")(doc)
    assert [(e.text, e.label_) for e in expanded.ents] == [("我在北京市工作", "LOC")]
    nlp.get_pipe("crf_ner").alignment_mode = "strict"
    with pytest.warns(UserWarning, match="1 entities"):
        strict = nlp.get_pipe("crf_ner")(Doc(nlp.vocab, words=["我在北", "京市工作"], spaces=[False, False]))
    assert list(strict.ents) == []
    with pytest.raises(ValueError, match="alignment_mode"):
        spacy.blank("zh").add_pipe("crf_ner", config={"alignment_mode": "exact"})


def test_a_character_model_tags_pkuseg_docs_on_their_characters(tmp_path):
    pkuseg = pytest.importorskip("spacy_pkuseg", reason="needs spacy-pkuseg (the test extra installs it)")
    # A pkuseg model trained here on segmented sentences (its published models need a download).
    segmented = "张三 去了 上海\n李四 是 阿里巴巴 的 员工\n我 在 北京市 工作\n王五 住 在 广州\n"
    (tmp_path / "train.txt").write_text(segmented * 60, encoding="utf8")
    (tmp_path / "test.txt").write_text(segmented, encoding="utf8")
    pkuseg.train(str(tmp_path / "train.txt"), str(tmp_path / "test.txt"), str(tmp_path / "pkuseg"), train_iter=5)
    nlp = spacy.blank(
        "zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.zh.ChineseTokenizer", "segmenter": "pkuseg"}}}
    )
    nlp.tokenizer.initialize(pkuseg_model=str(tmp_path / "pkuseg"))
    nlp.add_pipe("crf_ner", source=load_trained())
    text = "李四是阿里巴巴的员工"
    doc = nlp(text)
    assert "阿里巴巴" in [t.text for t in doc]  # pkuseg's words
    expected = [(e.start_char, e.end_char, e.label_) for e in load_trained()(text).ents]
    assert expected and [(e.start_char, e.end_char, e.label_) for e in doc.ents] == expected
