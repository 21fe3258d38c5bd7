"""Augmentation (spacy_cner.training.augment): mention replacement (crf_ner's replace_mentions, MentionPool) and
training on joined pairs (join_pairs, crf_ner's join_examples)."""

import pickle
import random
from collections import Counter
from typing import List, Tuple

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import fix_random_seed

import spacy_cner  # noqa: F401  (registers crf_ner)
from conftest import make_examples
from toy_pipe import pipe_config, train
from spacy_cner.pipeline import crf_ner as crf_ner_module
from spacy_cner.training.augment import MentionPool, join_pairs, mention_replaced_texts

TRAIN = [
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四在北京市工作", [(0, 2, "PER"), (3, 6, "LOC")]),
    ("王小明住在广州", [(0, 3, "PER"), (5, 7, "LOC")]),
    ("阿里巴巴在杭州", [(0, 4, "ORG"), (5, 7, "LOC")]),
]


def make_example(nlp, text, ents):
    doc = nlp.make_doc(text)
    doc.set_ents([doc.char_span(s, e, label) for s, e, label in ents], default="outside")
    return Example(nlp.make_doc(text), doc)


def mentions(doc):
    return [(ent.text, ent.label_) for ent in doc.ents]


def make_pool(nlp):
    pool = MentionPool()
    pool.add(make_example(nlp, text, ents) for text, ents in TRAIN)
    return pool


def test_replaces_entities_by_other_mentions_of_their_label():
    nlp = spacy.blank("zh")
    pool = make_pool(nlp)
    assert len(pool) == 8
    names = {label: {t[s:e] for t, ents in TRAIN for s, e, l in ents if l == label} for label in ("PER", "LOC")}
    random.seed(0)
    seen = Counter()
    for _ in range(30):
        (example,) = pool.replace([make_example(nlp, "听说张三去了上海。", [(2, 4, "PER"), (6, 8, "LOC")])], 1.0)
        new = mentions(example.reference)
        assert [label for _, label in new] == ["PER", "LOC"]
        # level 1: each entity is replaced, by another mention of its label
        assert new[0][0] in names["PER"] - {"张三"} and new[1][0] in names["LOC"] - {"上海"}
        assert example.reference.text == f"听说{new[0][0]}去了{new[1][0]}。"
        assert [t.text for t in example.predicted] == [t.text for t in example.reference] == list(example.text)
        assert not example.predicted.ents
        seen.update(new)
    assert len(seen) == len(names["PER"]) - 1 + len(names["LOC"]) - 1  # every other mention drawn
    # ORG has a single mention: nothing to swap it for
    example = make_example(nlp, "阿里巴巴很大", [(0, 4, "ORG")])
    assert pool.replace([example], 1.0)[0] is example
    # level 0: none replaced
    example = make_example(nlp, "张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")])
    assert pool.replace([example], 0.0)[0] is example


def test_mention_replaced_texts_for_a_teacher():
    """distill's augment: copies of the docs with every entity swapped for another mention of its label,
    the same for a seed, none a text of the docs, of exclude or of an earlier copy; docs without entities
    give none."""
    nlp = spacy.blank("zh")
    docs = [make_example(nlp, text, ents).reference for text, ents in TRAIN] + [nlp.make_doc("今天天气很好")]
    names = {label: {t[s:e] for t, ents in TRAIN for s, e, l in ents if l == label} for label in ("PER", "LOC")}
    texts = mention_replaced_texts(docs, 3, seed=1)
    assert texts == mention_replaced_texts(docs, 3, seed=1)
    assert texts != mention_replaced_texts(docs, 3, seed=2)
    assert len(texts) == len(set(texts)) and not set(texts) & {doc.text for doc in docs}
    # 3 PER x 3 LOC contexts of the PER-LOC docs: each a copy with another name of each label
    first = [text for text in texts if text.endswith(("上海", "北京市", "广州", "杭州")) and "去了" in text]
    assert first and all(text[: text.index("去了")] in names["PER"] - {"张三"} for text in first)
    assert all(text[text.index("去了") + 2 :] in names["LOC"] - {"上海"} for text in first)
    # The ORG doc's single ORG mention stays, its LOC is replaced
    assert all(text.startswith("阿里巴巴在") for text in texts if "阿里巴巴" in text)
    assert len(texts) <= 3 * len(TRAIN)
    excluded = mention_replaced_texts(docs, 3, seed=1, exclude=texts[:2])
    assert not set(excluded) & set(texts[:2])
    assert mention_replaced_texts(docs, 0) == []
    with pytest.raises(ValueError, match="at least 0"):
        mention_replaced_texts(docs, -1)


def test_examples_it_cannot_carry_are_left_as_they_are():
    nlp = spacy.blank("zh")
    pool = make_pool(nlp)
    partial = nlp.make_doc("张三去了上海")
    partial.set_ents([partial.char_span(0, 2, "PER")], missing=[partial[4:6]])
    tagged = make_example(nlp, "张三去了上海", [(0, 2, "PER")]).reference
    for token in tagged:
        token.tag_ = "X"
    with_spans = make_example(nlp, "张三去了上海", [(0, 2, "PER")]).reference
    with_spans.spans["sc"] = [with_spans[0:2]]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in (partial, tagged, with_spans, nlp.make_doc("没有实体"))]
    # predicted tokens other than the reference's (a word tokenizer), pre-set entities
    words = Doc(nlp.vocab, words=["张三", "去了", "上海"], spaces=[False, False, False])
    examples.append(Example(words, make_example(nlp, "张三去了上海", [(0, 2, "PER")]).reference))
    preset = nlp.make_doc("张三去了上海")
    preset.set_ents([preset.char_span(4, 6, "LOC")])
    examples.append(Example(preset, make_example(nlp, "张三去了上海", [(0, 2, "PER")]).reference))
    for example, replaced in zip(examples, pool.replace(examples, 1.0)):
        assert replaced is example


def test_keeps_spaces_and_sentence_starts():
    nlp = spacy.blank("zh")
    words = ["Apple", " ", "iPhone", "手", "机", "，", "华", "为", "好"]
    train = Doc(
        nlp.vocab,
        words=words,
        spaces=[False] * 9,
        ents=["B-BRAND", "I-BRAND", "I-BRAND", "O", "O", "O", "B-BRAND", "I-BRAND", "O"],
    )
    pool = MentionPool()
    pool.add([Example(train.copy(), train)])
    reference = Doc(
        nlp.vocab,
        words=["买", "华", "为", "吧", "。", "好"],
        spaces=[False, False, True, False, False, False],
        ents=["O", "B-BRAND", "I-BRAND", "O", "O", "O"],
        sent_starts=[True, False, False, False, False, True],
    )
    predicted = Doc(nlp.vocab, words=[t.text for t in reference], spaces=[bool(t.whitespace_) for t in reference])
    (example,) = pool.replace([Example(predicted, reference)], 1.0)
    new = example.reference
    assert mentions(new) == [("Apple iPhone", "BRAND")]
    assert new.text == example.predicted.text == "买Apple iPhone 吧。好"  # the mention's space, the doc's after it
    assert [t.text for t in new] == ["买", "Apple", " ", "iPhone", "吧", "。", "好"]
    assert [t.is_sent_start for t in new] == [True, False, False, False, False, False, True]


def test_crf_ner_trains_on_replaced_mentions(monkeypatch):
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("crf_ner", config={"replace_mentions": 1.0})
    examples = [make_example(nlp, text, ents) for text, ents in TRAIN]
    nlp.initialize(lambda: examples)
    assert len(ner._mentions) == 8  # from initialize's examples
    assert pickle.loads(pickle.dumps(nlp)).get_pipe("crf_ner").replace_mentions == 1.0
    trained_on = []
    get_loss = ner.get_loss
    monkeypatch.setattr(ner, "get_loss", lambda egs, scores: trained_on.extend(egs) or get_loss(egs, scores))
    random.seed(0)
    nlp.update(examples[:3])
    assert len(trained_on) == 3
    for original, example in zip(examples, trained_on):
        old, new = mentions(original.reference), mentions(example.reference)
        assert [label for _, label in new] == [label for _, label in old]
        assert all(a != b for (a, _), (b, _) in zip(old, new))
    assert [mentions(eg.reference) for eg in examples] == [
        [(t[s:e], label) for s, e, label in ents] for t, ents in TRAIN
    ]  # the caller's examples are untouched
    with pytest.raises(ValueError, match="replace_mentions"):
        spacy.blank("zh").add_pipe("crf_ner", config={"replace_mentions": 2.0})


# Training on joined pairs (join_examples)


def _entity_texts(example: Example) -> List[Tuple[str, str]]:
    return [(ent.text, ent.label_) for ent in example.reference.ents]


def test_join_pairs_keeps_every_token_and_entity():
    nlp = spacy.blank("zh")
    examples = make_examples(nlp)
    random.seed(1)
    joined = join_pairs(examples, 1.0)
    assert len(joined) == 3  # two pairs and the odd one out
    assert sum(len(eg.predicted) for eg in joined) == sum(len(eg.predicted) for eg in examples)
    texts = {eg.text for eg in examples}
    pairs = [eg for eg in joined if eg.text not in texts]
    assert len(pairs) == 2
    for eg in pairs:
        first = next(e for e in examples if eg.text.startswith(e.text))
        second = next(e for e in examples if eg.text == first.text + e.text)
        assert _entity_texts(eg) == _entity_texts(first) + _entity_texts(second)
        # The joint is no sentence start: a text joined before tokenization has none there.
        assert not eg.predicted[len(first.predicted)].is_sent_start
        assert eg.get_aligned_ner() == first.get_aligned_ner() + second.get_aligned_ner()


def test_join_pairs_share():
    nlp = spacy.blank("zh")
    examples = make_examples(nlp) * 20
    random.seed(0)
    assert join_pairs(examples, 0.0) == examples
    n_joined = [100 - len(join_pairs(examples, 0.3)) for _ in range(200)]  # one fewer per pair
    assert abs(numpy.mean(n_joined) - 15) < 1.0


def test_join_examples_setting_trains_on_pairs(monkeypatch):
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="join_examples"):
        nlp.add_pipe("crf_ner", config={"join_examples": 1.5})
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={**pipe_config("BIOES"), "join_examples": 1.0})
    examples = make_examples(nlp)
    seen = []

    def spy(batch, share):
        joined = join_pairs(batch, share)
        seen.append([eg.text for eg in joined])
        return joined

    monkeypatch.setattr(crf_ner_module, "join_pairs", spy)
    losses = train(nlp, examples, n_steps=60)
    assert all(len(batch) == 3 for batch in seen)
    assert len({tuple(sorted(batch)) for batch in seen}) > 5  # fresh pairs each step
    assert losses[-1] < losses[0] / 5
    assert nlp.evaluate(make_examples(nlp))["ents_f"] == 1.0
