"""Lexicon loading (word lists, word2vec text, jieba) and trie matching of words to characters."""

import numpy
import pytest
import srsly

from spacy_cner.lexicon import Lexicon


def write(path, text):
    path.write_text(text, encoding="utf8")
    return path


def words_at(lexicon, text, cap):
    return [[lexicon.words[i] for _, _, i in words] for words in lexicon.match(text, cap)]


def test_word_list_with_frequencies_and_tags(tmp_path):
    path = write(
        tmp_path / "dict.txt", "\ufeff南京 300 ns\n南京市 200 ns\n\n长江大桥 50\n市 999 n\n长江 100 ns\n长江 7\n"
    )
    lexicon, stats = Lexicon.from_word_list(path)
    assert lexicon.words == ["南京", "南京市", "长江大桥", "长江"]
    assert lexicon.frequencies.tolist() == [300, 200, 50, 100]
    assert (stats.too_short, stats.duplicates, stats.n_words) == (1, 1, 4)
    lexicon, stats = Lexicon.from_word_list(path, min_frequency=100, max_word_length=3)
    assert lexicon.words == ["南京", "南京市", "长江"]
    assert (stats.too_rare, stats.too_long) == (1, 1)  # 长江 7, 长江大桥
    lexicon, stats = Lexicon.from_word_list(path, max_words=2)
    assert lexicon.words == ["南京", "南京市"]  # the most frequent, in file order
    assert stats.over_max_words == 2


def test_word_list_without_frequencies(tmp_path):
    path = write(tmp_path / "words.txt", "南京\n长江 ns\nABC\n2024年\n")
    lexicon, _ = Lexicon.from_word_list(path, max_words=3)
    assert lexicon.words == ["南京", "长江", "ABC"] and lexicon.frequencies is None
    with pytest.raises(ValueError, match=r"words.txt, line 1: min_frequency is set but the line has no frequency"):
        Lexicon.from_word_list(path, min_frequency=2)


def test_bad_word_list_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.txt", "南京 3 ns\n长江 大桥 ns\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: expected 'word \[frequency\] \[tag\]'"):
        Lexicon.from_word_list(path)


def test_word2vec(tmp_path):
    path = write(tmp_path / "vectors.txt", "4 3\n南京 0.1 0.2 0.3\n的 1 1 1\n长江大桥 -1 0 2.5\n南京 9 9 9\n")
    lexicon, stats = Lexicon.from_word2vec(path)
    assert lexicon.words == ["南京", "长江大桥"]
    numpy.testing.assert_allclose(lexicon.vectors, [[0.1, 0.2, 0.3], [-1, 0, 2.5]])
    assert (stats.too_short, stats.duplicates) == (1, 1)
    lexicon, stats = Lexicon.from_word2vec(path, max_words=1)
    assert lexicon.words == ["南京"] and stats.over_max_words == 3


@pytest.mark.parametrize(
    "text, message",
    [
        ("3 2\n南京 1 2\n长江 1\n", r"line 3: expected a word and 2 numbers, got 1 values after '长江'"),
        ("3 2\n南京 1 2\n长江 1 x\n", r"line 3: could not convert"),
        ("3 2\n南京 1 2\n长江 1 2\n", r"the header says 3 vectors but the file has 2 \(truncated\?\)"),
        ("南京 1 2\n", r"line 1: expected the word2vec header 'count dim'"),
    ],
)
def test_bad_word2vec_fails_loudly(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        Lexicon.from_word2vec(write(tmp_path / "vectors.txt", text))


def test_jieba_dictionary():
    lexicon, stats = Lexicon.from_jieba(max_word_length=6)
    assert len(lexicon) > 300_000 and stats.too_short > 0
    assert "长江大桥" in lexicon and "南京市" in lexicon
    assert lexicon.frequencies is not None


def test_matching_nested_and_overlapping_words():
    lexicon = Lexicon(["南京", "南京市", "市长", "长江", "长江大桥", "大桥", "江大桥"])
    assert lexicon.find("南京市长江大桥") == [
        (0, 2, 0),
        (0, 3, 1),
        (2, 4, 2),
        (3, 5, 3),
        (3, 7, 4),
        (4, 7, 6),
        (5, 7, 5),
    ]
    assert words_at(lexicon, "南京市长江大桥", 10)[3] == ["市长", "长江", "长江大桥"]


def test_cap_keeps_the_longest_words():
    """LEBERT keeps the shortest, earliest words; cap 3 then loses 长江大桥 at 长. Longest first keeps it."""
    lexicon = Lexicon(["南京市长", "市长", "长江", "长江大桥", "长"])
    at_chang = words_at(lexicon, "南京市长江大桥", 3)[3]
    assert at_chang == ["南京市长", "市长", "长江大桥"]
    assert words_at(lexicon, "南京市长江大桥", 1)[4] == ["长江大桥"]
    with pytest.raises(ValueError, match="max_words_per_char must be at least 1"):
        lexicon.match("长江", 0)


def test_latin_digits_and_no_match():
    lexicon = Lexicon(["iPhone", "2024年", "北京"])
    text = "我在北京买了iPhone，2024年。"
    found = {lexicon.words[i]: (s, e) for s, e, i in lexicon.find(text)}
    assert found == {"北京": (2, 4), "iPhone": (6, 12), "2024年": (13, 18)}
    matched = lexicon.match(text, 3)
    assert matched[0] == [] and matched[12] == [] and len(matched) == len(text)


def test_empty_lexicon_and_empty_text():
    empty = Lexicon([])
    assert empty.match("北京", 3) == [[], []]
    assert Lexicon(["北京"]).match("", 3) == []


def test_invalid_words_raise():
    with pytest.raises(ValueError, match=r"'北京' occurs twice \(entries 0 and 2\)"):
        Lexicon(["北京", "上海", "北京"])
    with pytest.raises(ValueError, match=r"'北\\u3000京' \(entry 1\).*without whitespace"):
        Lexicon(["上海", "北\u3000京"])
    with pytest.raises(ValueError, match=r"'' \(entry 1\)"):
        Lexicon(["上海", ""])
    with pytest.raises(ValueError, match=r"3 \(entry 1\): words are strings"):
        Lexicon(["上海", 3])
    with pytest.raises(ValueError, match=r"Invalid tag 'n\\nr' of lexicon word '北京'"):
        Lexicon(["上海", "北京"], tags=["ns", "n\nr"])
    with pytest.raises(ValueError, match=r"vectors have shape \(1, 2\)"):
        Lexicon(["北京", "上海"], vectors=numpy.zeros((1, 2)))


def test_bytes_round_trip_is_compact():
    vectors = numpy.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    lexicon = Lexicon(["北京", "上海", "长江大桥"], vectors=vectors, frequencies=[3, 2, 1])
    data = lexicon.to_bytes()
    loaded = Lexicon.from_bytes(data)
    assert loaded.words == lexicon.words and loaded.frequencies.tolist() == [3, 2, 1]
    numpy.testing.assert_allclose(loaded.vectors, vectors, rtol=1e-3, atol=1e-3)  # stored as float16
    assert loaded.match("北京长江大桥", 3) == lexicon.match("北京长江大桥", 3)
    assert len(data) < 220


def test_saved_prefixes_give_the_same_matching_dictionary():
    """The bytes hold the prefixes that are no word (loading need not cut every word again);
    bytes without them, as earlier versions wrote, still load."""
    words = ["北京", "北京市", "长江大桥", "长江", "南京市长"]
    built = Lexicon(words).prefixes
    assert built == {
        "北": -1,
        "北京": 0,
        "北京市": 1,
        "长": -1,
        "长江": 3,
        "长江大": -1,
        "长江大桥": 2,
        "南": -1,
        "南京": -1,
        "南京市": -1,
        "南京市长": 4,
    }
    loaded = Lexicon.from_bytes(Lexicon(words).to_bytes())
    assert loaded._saved_prefixes is not None and loaded.prefixes == built
    old = srsly.msgpack_loads(Lexicon(words).to_bytes())
    del old["prefixes"]
    assert Lexicon.from_bytes(srsly.msgpack_dumps(old)).prefixes == built


def test_match_spans_of_character_and_word_tokens():
    import spacy
    from spacy.tokens import Doc

    from spacy_cner.lexicon import token_spans

    def match_tokens(doc, max_words):
        return lexicon.match_spans(doc.text, token_spans(doc), max_words)

    lexicon = Lexicon(["南京市", "市长", "长江大桥", "大桥"])
    nlp = spacy.blank("zh")
    chars = nlp.make_doc("南京市  长江大桥")  # one space is 市's trailing whitespace, one a token
    per_char = lexicon.match(chars.text, 3)
    assert match_tokens(chars, 3) == [per_char[token.idx] for token in chars]
    assert chars[3].is_space and match_tokens(chars, 3)[3] == []
    words = Doc(nlp.vocab, words=["南京", "市长", "江大桥"], spaces=[False, False, False])
    by_token = [[lexicon.words[i] for _, _, i in matches] for matches in match_tokens(words, 3)]
    assert by_token == [["南京市"], ["南京市", "市长", "长江大桥"], ["长江大桥", "大桥"]]
    assert [[lexicon.words[i] for _, _, i in m] for m in match_tokens(words, 1)][1] == ["长江大桥"]


def test_word2vec_with_more_vectors_than_its_header(tmp_path):
    path = write(tmp_path / "vectors.txt", "1 2\n南京 1 2\n长江 3 4\n")
    with pytest.raises(ValueError, match=r"vectors.txt, line 3: more vectors than the header's 1"):
        Lexicon.from_word2vec(path)


@pytest.mark.parametrize(
    "words, spaces",
    [
        (list("张三在北京工作。"), None),
        (["Li", " ", "Si", "在", "\n", "上海", "  "], [True, False, False, True, False, False, False]),
        (["x"], [True]),
        ([], []),
    ],
)
def test_doc_text_is_the_docs_text(words, spaces):
    """doc_text reads the text off the token arrays (no Token objects), the same as Doc.text."""
    import spacy
    from spacy.tokens import Doc

    from spacy_cner.lexicon import doc_text

    doc = Doc(spacy.blank("zh").vocab, words=words, spaces=spaces)
    assert doc_text(doc) == doc.text


def test_saved_lexicons_are_compressed_and_earlier_uncompressed_ones_load():
    from spacy_cner.layers.lexicon_slot import layer_lexicon as adapter_lexicon, set_lexicon
    from spacy_cner.layers.soft_lexicon import SoftLexicon
    from spacy_cner.pipeline.lexicons import lexicons_to_bytes, load_lexicons

    words = [f"北京{i}号" for i in range(2000)]
    layer = SoftLexicon()
    set_lexicon(layer, Lexicon(words, frequencies=list(range(2000))))
    data = lexicons_to_bytes(layer)
    plain = srsly.msgpack_dumps([adapter_lexicon(layer).to_bytes()])  # as earlier versions saved it
    assert len(data) < len(plain) / 3
    for saved in (data, plain):
        loaded = SoftLexicon()
        load_lexicons(loaded, saved, "test", "crf_ner")
        lexicon = adapter_lexicon(loaded)
        assert lexicon.words == words and lexicon.frequencies.tolist() == list(range(2000))
        assert lexicon.match("去北京12号", 6) == adapter_lexicon(layer).match("去北京12号", 6)
    with pytest.raises(ValueError, match="crf_ner/lexicon is not a readable lexicon .*truncated or altered"):
        load_lexicons(SoftLexicon(), data[: len(data) // 2], "model/crf_ner/lexicon", "crf_ner")
