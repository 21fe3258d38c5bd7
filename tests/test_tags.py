"""Tag schemes: names, span <-> tag conversion, allowed transitions."""

import itertools

import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_cner.tags import (
    TagSet,
    aligned_ner,
    allowed_transitions,
    biluo_to_tags,
    get_tag_names,
    is_valid_sequence,
    most_probable_spans,
    spans_to_tags,
    split_tag,
    tags_to_spans,
    validate_scheme,
)

LABELS = ["LOC", "PER", "GPE-X"]


def test_get_tag_names():
    assert get_tag_names(["LOC", "PER"], "BIOES") == [
        "O",
        "B-LOC",
        "I-LOC",
        "E-LOC",
        "S-LOC",
        "B-PER",
        "I-PER",
        "E-PER",
        "S-PER",
    ]
    assert get_tag_names(["LOC", "PER"], "bio") == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert get_tag_names([], "BIO") == ["O"]


def test_validate_scheme():
    assert validate_scheme("bioes") == "BIOES"
    with pytest.raises(ValueError, match="BIOES, BIO"):
        validate_scheme("BMES")
    with pytest.raises(ValueError, match="Unknown tag scheme"):
        get_tag_names(["LOC"], "IOB2")


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
def test_tag_set_names_round_trip(scheme):
    tag_set = TagSet(tuple(LABELS), scheme.lower())
    assert tag_set.scheme == scheme and tag_set.names == get_tag_names(LABELS, scheme)
    assert TagSet.from_names(tag_set.names) == tag_set
    assert [tag_set.names[i] for i in tag_set.columns["I"]] == [f"I-{label}" for label in LABELS]
    assert all(tag_set.names[i] == tag for tag, i in tag_set.index.items())
    assert TagSet.from_names(["O"]).labels == ()
    assert TagSet.from_names(["O"], scheme.lower()) == TagSet((), scheme)
    assert TagSet.from_names(tag_set.names, scheme) == tag_set


@pytest.mark.parametrize(
    "names",
    [
        ["B-LOC", "O", "I-LOC"],  # "O" not first
        ["O", "B-LOC", "I-LOC", "E-LOC"],  # S-LOC missing
        ["O", "I-LOC", "B-LOC"],  # prefixes out of order
    ],
)
def test_tag_set_refuses_names_of_no_scheme(names):
    with pytest.raises(ValueError, match="are not the tags of a scheme"):
        TagSet.from_names(names)


def test_tag_set_refuses_names_of_another_scheme():
    with pytest.raises(ValueError, match="are not the tags of a scheme"):
        TagSet.from_names(get_tag_names(LABELS, "BIOES"), "BIO")
    with pytest.raises(ValueError, match="are not the tags of a scheme"):
        TagSet.from_names(get_tag_names(LABELS, "BIOES"), "bio")


def test_split_tag():
    assert split_tag("O") == ("O", "")
    assert split_tag("B-GPE-X") == ("B", "GPE-X")
    for bad in ("B", "B-", "LOC"):
        with pytest.raises(ValueError, match="Invalid tag"):
            split_tag(bad)


@pytest.mark.parametrize(
    "spans,length,scheme,tags",
    [
        ([(0, 2, "LOC"), (3, 4, "PER")], 5, "BIOES", ["B-LOC", "E-LOC", "O", "S-PER", "O"]),
        ([(0, 2, "LOC"), (3, 4, "PER")], 5, "BIO", ["B-LOC", "I-LOC", "O", "B-PER", "O"]),
        ([(0, 3, "LOC")], 3, "BIOES", ["B-LOC", "I-LOC", "E-LOC"]),
        ([(0, 1, "LOC"), (1, 2, "LOC")], 2, "BIO", ["B-LOC", "B-LOC"]),
        ([], 0, "BIOES", []),
    ],
)
def test_spans_to_tags_examples(spans, length, scheme, tags):
    assert spans_to_tags(spans, length, scheme) == tags
    assert tags_to_spans(tags) == spans


@pytest.mark.parametrize("spans", [[(2, 4, "LOC")], [(1, 1, "LOC")], [(-1, 1, "LOC")]])
def test_spans_to_tags_out_of_range(spans):
    with pytest.raises(ValueError, match="outside"):
        spans_to_tags(spans, 3, "BIOES")


def test_spans_to_tags_overlap():
    with pytest.raises(ValueError, match="overlaps"):
        spans_to_tags([(0, 2, "LOC"), (1, 3, "PER")], 3, "BIO")


@st.composite
def span_sets(draw):
    """A length and a random set of non-overlapping, possibly adjacent spans."""
    length = draw(st.integers(0, 12))
    cuts = sorted(draw(st.sets(st.integers(0, length), max_size=length + 1)))
    spans = []
    for start, end in zip(cuts[:-1], cuts[1:]):
        if draw(st.booleans()):
            spans.append((start, end, draw(st.sampled_from(LABELS))))
    return spans, length


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(span_sets(), st.sampled_from(["BIOES", "BIO"]))
def test_spans_tags_round_trip(spans_length, scheme):
    spans, length = spans_length
    tags = spans_to_tags(spans, length, scheme)
    assert len(tags) == length
    assert tags_to_spans(tags) == spans
    tag_names = get_tag_names(LABELS, scheme)
    assert is_valid_sequence([tag_names.index(tag) for tag in tags], tag_names)


@pytest.mark.parametrize(
    "scheme,expected",
    [
        ("BIOES", ["B-LOC", "I-LOC", "E-LOC", "O", "S-PER", None, None, None]),
        ("BIO", ["B-LOC", "I-LOC", "I-LOC", "O", "B-PER", None, None, None]),
    ],
)
def test_biluo_to_tags(scheme, expected):
    biluo = ["B-LOC", "I-LOC", "L-LOC", "O", "U-PER", "-", "", None]
    assert biluo_to_tags(biluo, scheme) == expected


def _masks(labels, scheme):
    names = get_tag_names(labels, scheme)
    start, transitions, end = allowed_transitions(names)
    return (
        {tag: bool(start[i]) for i, tag in enumerate(names)},
        {(a, b): bool(transitions[i, j]) for (i, a), (j, b) in itertools.product(enumerate(names), repeat=2)},
        {tag: bool(end[i]) for i, tag in enumerate(names)},
    )


def test_allowed_transitions_bioes():
    start, trans, end = _masks(["X", "Y"], "BIOES")
    assert {tag for tag, ok in start.items() if ok} == {"O", "B-X", "S-X", "B-Y", "S-Y"}
    assert {tag for tag, ok in end.items() if ok} == {"O", "E-X", "S-X", "E-Y", "S-Y"}
    for allowed in [
        ("O", "O"),
        ("O", "B-X"),
        ("O", "S-X"),
        ("B-X", "I-X"),
        ("B-X", "E-X"),
        ("I-X", "I-X"),
        ("I-X", "E-X"),
        ("E-X", "B-Y"),
        ("E-X", "O"),
        ("S-X", "S-X"),
        ("S-Y", "B-X"),
    ]:
        assert trans[allowed], allowed
    for forbidden in [
        ("O", "I-X"),
        ("O", "E-X"),
        ("B-X", "I-Y"),
        ("B-X", "E-Y"),
        ("B-X", "O"),
        ("B-X", "B-X"),
        ("B-X", "S-Y"),
        ("I-X", "O"),
        ("I-X", "I-Y"),
        ("E-X", "I-X"),
        ("E-X", "E-X"),
        ("S-X", "I-X"),
        ("S-X", "E-X"),
    ]:
        assert not trans[forbidden], forbidden


def test_allowed_transitions_bio():
    start, trans, end = _masks(["X", "Y"], "BIO")
    assert {tag for tag, ok in start.items() if ok} == {"O", "B-X", "B-Y"}
    assert all(end.values())
    for allowed in [
        ("O", "O"),
        ("O", "B-X"),
        ("B-X", "I-X"),
        ("I-X", "I-X"),
        ("B-X", "O"),
        ("I-X", "O"),
        ("B-X", "B-X"),
        ("I-X", "B-Y"),
        ("B-X", "B-Y"),
    ]:
        assert trans[allowed], allowed
    for forbidden in [("O", "I-X"), ("B-X", "I-Y"), ("I-X", "I-Y"), ("B-Y", "I-X")]:
        assert not trans[forbidden], forbidden


def test_is_valid_sequence():
    names = get_tag_names(["X"], "BIOES")
    ids = {tag: i for i, tag in enumerate(names)}
    valid = lambda tags: is_valid_sequence([ids[t] for t in tags], names)  # noqa: E731
    assert valid([])
    assert valid(["B-X", "I-X", "E-X", "S-X", "O"])
    assert not valid(["I-X", "E-X"])
    assert not valid(["B-X"])
    assert not valid(["O", "E-X"])


@pytest.mark.parametrize(
    "tags,spans",
    [
        (["O", "I-X", "I-X"], [(1, 3, "X")]),  # BIO continuation with no opener
        (["I-X", "E-X"], [(0, 2, "X")]),  # BIOES, missing B
        (["B-X", "I-Y", "O"], [(0, 1, "X"), (1, 2, "Y")]),  # label change
        (["B-X", "O", "E-X"], [(0, 1, "X"), (2, 3, "X")]),  # opener never closed
        (["S-X", "I-X", "E-X"], [(0, 1, "X"), (1, 3, "X")]),  # continuation after S
        (["E-X", "E-X"], [(0, 1, "X"), (1, 2, "X")]),
        (["B-X", "B-X", "S-Y"], [(0, 1, "X"), (1, 2, "X"), (2, 3, "Y")]),
        (["B-X", "I-X"], [(0, 2, "X")]),  # BIOES, not closed at the end
    ],
)
def test_tags_to_spans_lenient(tags, spans):
    assert tags_to_spans(tags) == spans


TAGS_ALL = get_tag_names(LABELS, "BIOES")


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(TAGS_ALL), max_size=10))
def test_tags_to_spans_loses_no_entity(tags):
    """Every non-O token is covered by exactly one span of its label; spans are in order."""
    spans = tags_to_spans(tags)
    covered = {}
    prev_end = 0
    for start, end, label in spans:
        assert prev_end <= start < end <= len(tags)
        prev_end = end
        for i in range(start, end):
            covered[i] = label
    for i, tag in enumerate(tags):
        if tag == "O":
            assert i not in covered
        else:
            assert covered.get(i) == split_tag(tag)[1]


def test_most_probable_spans():
    probabilities = {(0, 2, "PER"): 0.45, (1, 3, "ORG"): 0.4, (3, 5, "LOC"): 0.3, (5, 6, "LOC"): 0.05}
    # Most probable first; an overlapping span is left out, whatever its probability.
    assert most_probable_spans(probabilities, 0.25) == [(0, 2, "PER"), (3, 5, "LOC")]
    assert most_probable_spans(probabilities, 0.42) == [(0, 2, "PER")]
    assert most_probable_spans(probabilities, 0.5) == []
    assert most_probable_spans(probabilities, 0.0) == [(0, 2, "PER"), (3, 5, "LOC"), (5, 6, "LOC")]
    # Required spans (entities set before the pipe) come first and block what overlaps them.
    assert most_probable_spans(probabilities, 0.25, required=[(1, 2, "PER")]) == [(1, 2, "PER"), (3, 5, "LOC")]
    # Ties: the earlier span, then the shorter one, whatever the dict's order.
    tied = {(2, 5, "LOC"): 0.3, (1, 3, "ORG"): 0.3, (1, 2, "PER"): 0.3}
    assert (
        most_probable_spans(dict(reversed(list(tied.items()))), 0.1)
        == most_probable_spans(tied, 0.1)
        == [
            (1, 2, "PER"),
            (2, 5, "LOC"),
        ]
    )
    assert most_probable_spans({}, 0.1) == []


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.integers(0, 8), st.integers(1, 4), st.sampled_from("AB")).map(lambda t: (t[0], t[0] + t[1], t[2])),
        st.floats(0, 1),
        max_size=8,
    ),
    st.floats(0, 1),
)
def test_most_probable_spans_keeps_every_sure_span(probabilities, threshold):
    kept = most_probable_spans(probabilities, threshold)
    assert all(probabilities[span] >= threshold for span in kept)
    assert all(a[1] <= b[0] for a, b in zip(kept, kept[1:]))  # in order, none overlapping
    # Every span left out above the threshold overlaps a kept span at least as probable.
    for span, p in probabilities.items():
        if p >= threshold and span not in kept:
            assert any(k[0] < span[1] and span[0] < k[1] and probabilities[k] >= p for k in kept)


# ---------------------------------------------------------------------------
# aligned_ner: spaCy's get_aligned_ner, read off the reference where the tokens are the same

ZH = spacy.blank("zh")


def _reference(words, spaces, ents, default):
    doc = Doc(ZH.vocab, words=words, spaces=spaces)
    doc.set_ents([Span(doc, start, end, label) for start, end, label in ents], default=default)
    return doc


ALIGNED_CASES = {
    "full": (list("张三去了上海"), None, [(0, 2, "PER"), (4, 6, "LOC")], "outside"),
    "partial": (list("张三去了上海"), None, [(4, 6, "LOC")], "missing"),
    "single-token entity": (list("我在京"), None, [(2, 3, "LOC")], "outside"),
    "whitespace token, missing": (["张", "三", " ", "上", "海"], None, [(3, 5, "LOC")], "missing"),
    "trailing spaces": (["Li", "Si", "在", "上海"], [True, False, False, False], [(0, 2, "PER")], "missing"),
    "three-token entity": (list("北京大学"), None, [(0, 4, "ORG")], "outside"),
}


@pytest.mark.parametrize("case", list(ALIGNED_CASES))
def test_aligned_ner_same_tokens_matches_spacy(case):
    words, spaces, ents, default = ALIGNED_CASES[case]
    reference = _reference(words, spaces, ents, default)
    example = Example(Doc(ZH.vocab, words=words, spaces=spaces), reference)
    assert aligned_ner(example) == example.get_aligned_ner()


def test_aligned_ner_without_annotation_is_missing():
    example = Example(ZH.make_doc("张三去了上海"), ZH.make_doc("张三去了上海"))
    assert aligned_ner(example) == example.get_aligned_ner() == [None] * 6


@pytest.mark.parametrize(
    "predicted_words, reference_words, ents",
    [
        (["张三", "去了", "上海"], list("张三去了上海"), [(0, 2, "PER"), (4, 6, "LOC")]),
        (["张", "三去", "了上海"], list("张三去了上海"), [(0, 2, "PER"), (4, 6, "LOC")]),
        # The same number of tokens over the same text, cut elsewhere.
        (["张三", "去", "了", "上海"], ["张", "三去", "了", "上海"], [(0, 1, "PER"), (3, 4, "LOC")]),
    ],
)
def test_aligned_ner_other_tokens_falls_back_to_spacy(predicted_words, reference_words, ents):
    reference = _reference(reference_words, [False] * len(reference_words), ents, "outside")
    example = Example(Doc(ZH.vocab, words=predicted_words, spaces=[False] * len(predicted_words)), reference)
    assert aligned_ner(example) == example.get_aligned_ner()


@st.composite
def annotated_docs(draw):
    words = draw(st.lists(st.sampled_from(["张", "三", " ", "上海", "a"]), min_size=1, max_size=12))
    cuts = sorted(draw(st.sets(st.integers(0, len(words)), max_size=6)))
    ents = [(start, end, draw(st.sampled_from(["PER", "LOC"]))) for start, end in zip(cuts[::2], cuts[1::2])]
    return words, ents, draw(st.sampled_from(["outside", "missing"]))


@given(annotated_docs())
@settings(max_examples=200, deadline=None)
def test_aligned_ner_matches_spacy_on_random_docs(case):
    words, ents, default = case
    reference = _reference(words, None, ents, default)
    example = Example(Doc(ZH.vocab, words=words), reference)
    assert aligned_ner(example) == example.get_aligned_ner()
