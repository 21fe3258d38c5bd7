"""Windows over long docs: whole sentences where they fit, overlaps otherwise, nothing lost."""

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spacy
from spacy.tokens import Doc, Span

from spacy_cner import long_docs
from spacy_cner.long_docs import Window, doc_windows, ends_sentence, sentence_cuts, split_windows, window_doc
from spacy_cner.long_docs import window_segments

from conftest import small_config_pipeline


def test_short_doc_is_one_window():
    assert split_windows([3, 7], 9, 510) == [Window(0, 9, 0, 9)]


def test_cuts_at_the_last_sentence_end_that_fits():
    # Sentences end at 4, 8 and 12 of 15 wordpieces; 10 fit in a window.
    assert split_windows([4, 8, 12], 15, 10) == [Window(0, 8, 0, 8), Window(8, 15, 8, 15)]


def test_long_sentence_gets_overlapping_windows():
    windows = split_windows([2], 20, 8)
    assert windows[0] == Window(0, 2, 0, 2)
    rest = windows[1:]
    assert all(w.end - w.start == 8 for w in rest)
    assert rest[0].start == 2 and rest[-1].end == 20
    # Overlapping windows, each read in its middle part.
    assert all(a.end > b.start for a, b in zip(rest, rest[1:]))
    assert [w.own_start for w in rest[1:]] == [w.own_end for w in rest[:-1]]


def test_every_sentence_gets_its_own_window():
    assert split_windows([4, 8, 12], 15, 10, every_sentence=True) == [
        Window(0, 4, 0, 4),
        Window(4, 8, 4, 8),
        Window(8, 12, 8, 12),
        Window(12, 15, 12, 15),
    ]
    # A sentence longer than a window still gets overlapping windows, and nothing is lost.
    windows = split_windows([2], 20, 8, every_sentence=True)
    assert windows[0] == Window(0, 2, 0, 2) and windows[1].start == 2 and windows[-1].end == 20


def test_bad_size_raises():
    with pytest.raises(ValueError, match="max_length 1"):
        split_windows([], 5, 1)


@pytest.mark.parametrize("every_sentence", [False, True])
@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 120),
    max_length=st.integers(2, 30),
    ends=st.lists(st.integers(0, 130), max_size=25),
)
def test_windows_tile_the_doc(n, max_length, ends, every_sentence):
    windows = split_windows(sorted(ends), n, max_length, every_sentence)
    owned = [i for w in windows for i in range(w.own_start, w.own_end)]
    assert owned == list(range(n))
    for w in windows:
        assert 0 <= w.start <= w.own_start < w.own_end <= w.end <= n
        assert w.end - w.start <= max_length
    cuts = {e for e in ends if 0 < e < n} | {0, n}
    for w in windows:
        if w.start == w.own_start and w.end == w.own_end and w.end - w.start < max_length:
            # A window of whole sentences starts and ends at sentence ends
            assert w.start in cuts and w.end in cuts
    # A sentence that fits in a window is never cut: no window boundary falls inside it.
    sorted_cuts = sorted(cuts)
    for a, b in zip(sorted_cuts, sorted_cuts[1:]):
        if b - a <= max_length:
            assert any(w.start <= a and b <= w.end and w.own_start <= a and b <= w.own_end for w in windows)
    if every_sentence:
        # No window reads across a sentence end.
        assert not any(w.start < cut < w.end for w in windows for cut in cuts)


def test_doc_windows_cut_after_sentence_ends_outside_entities():
    nlp = spacy.blank("zh")
    doc = nlp.make_doc("张三去了上海。李四。\n王五在北京工作")
    assert [w.end for w in doc_windows(doc, 8)] == [7, 11, 18]  # after 。 and after 。\n
    # An entity over "。李" forbids the cut after the first 。; the window over it overlaps.
    doc.ents = [Span(doc, 6, 8, "X")]
    windows = doc_windows(doc, 8)
    assert 7 not in {w.own_end for w in windows}
    assert window_segments(windows)[0][0] == 0 and window_segments(windows)[-1][1] == len(doc)


def test_window_segments_join_overlapping_runs():
    windows = split_windows([2], 20, 8)  # [0, 2) alone, then overlapping windows over [2, 20)
    assert window_segments(windows) == [(0, 2), (2, 20)]
    assert window_segments(split_windows([4, 8, 12], 15, 10)) == [(0, 8), (8, 15)]


def test_window_doc_keeps_text_and_norms():
    nlp = spacy.blank("zh")
    doc = nlp.make_doc("Ab 张三。 李四")
    doc[0].norm_ = "custom"
    piece = window_doc(doc, Window(0, 4, 0, 4))
    assert piece.text == doc[0:4].text_with_ws and [t.norm_ for t in piece] == [t.norm_ for t in doc[0:4]]
    assert window_doc(doc, Window(4, len(doc), 4, len(doc))).text == doc[4:].text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["今", "天", "。", "！", "?", "\n", "a\nb", "很好", "；"]), max_size=30))
def test_sentence_cuts_are_the_offsets_after_sentence_ends(words):
    """Word tokens too (one holding a newline ends a sentence); never a cut at the doc's end."""
    doc = Doc(spacy.blank("zh").vocab, words=words, spaces=[False] * len(words))
    expected = [i + 1 for i, word in enumerate(words) if ends_sentence(word) and i + 1 < len(words)]
    cuts = sentence_cuts(doc)
    assert cuts.tolist() == expected
    assert cuts.dtype.kind == "i"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["今", "天", "。", "！", "?", "\n", "a\nb", "很好", "；"]), max_size=8), max_size=6
    )
)
def test_cuts_of_a_batch_are_each_docs_own(batch):
    """stacked_ends and the cuts computed for a whole batch at once equal each doc's alone (empty docs
    and docs of one sentence among them)."""
    vocab = spacy.blank("zh").vocab
    docs = [Doc(vocab, words=words, spaces=[False] * len(words)) for words in batch]
    alone = [[i + 1 for i, word in enumerate(words) if ends_sentence(word) and i + 1 < len(words)] for words in batch]
    offset, expected = 0, []
    for words, cuts in zip(batch, alone):
        expected += [offset + len(words) - 1] if words else []
        offset += len(words)
    offset, inside = 0, []
    for words, cuts in zip(batch, alone):
        inside += [offset + cut - 1 for cut in cuts]
        offset += len(words)
    assert long_docs.stacked_ends(docs, False).tolist() == expected
    assert long_docs.stacked_ends(docs, True).tolist() == expected + inside
    with long_docs.cuts_computed_once(docs):
        assert [sentence_cuts(doc).tolist() for doc in docs] == alone
        assert long_docs.stacked_ends(docs, True).tolist() == expected + inside
    assert [sentence_cuts(doc).tolist() for doc in docs] == alone


def test_sentence_cuts_read_each_vocab_alike():
    """The cache is keyed by orth id, the hash of the text: any vocab gives the same cuts."""
    first = Doc(spacy.blank("zh").vocab, words=list("好。好"), spaces=[False] * 3)
    second = Doc(spacy.blank("en").vocab, words=["好", "。", "好"], spaces=[False] * 3)
    assert sentence_cuts(first).tolist() == sentence_cuts(second).tolist() == [2]


def test_cuts_computed_once_per_doc_in_the_taggers_forward(request, monkeypatch):
    """The default tagger reads each doc's cuts three times in a forward (sentence_encoding and both
    bigram features): computed once for the whole batch, the same emissions; outside a forward
    nothing is kept."""

    nlp = small_config_pipeline("default", request)
    model = nlp.get_pipe("crf_ner").model
    docs = [nlp.make_doc(text) for text in ["张三去了北京。李四在上海！", "王五。", "没有句号"]]
    before = model.predict(docs)
    computed = []
    compute = long_docs._stacked_cuts
    monkeypatch.setattr(long_docs, "_stacked_cuts", lambda batch: computed.append(list(batch)) or compute(batch))
    after = model.predict(docs)
    assert len(computed) == 1 and [id(doc) for doc in computed[0]] == [id(doc) for doc in docs]
    assert all(numpy.array_equal(b, a) for b, a in zip(before, after))
    computed.clear()
    first, second = sentence_cuts(docs[0]), sentence_cuts(docs[0])
    assert len(computed) == 2 and first.tolist() == second.tolist() == [7]
    with long_docs.cuts_computed_once(docs):
        assert sentence_cuts(docs[0]).tolist() == [7]
        with pytest.raises(ValueError):
            sentence_cuts(docs[0])[0] = 0  # handed out again inside a forward: read-only
