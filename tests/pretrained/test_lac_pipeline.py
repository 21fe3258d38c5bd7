"""The ready LAC pipeline (lac_pipeline.py) on a fabricated sdist with tiny networks: builds, tags, saves and
loads offline; and, marked slow, LAC in torch against LAC's own outputs with the real sdist."""

import json
import os
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
import torch
from typer.testing import CliRunner

from conftest import REAL_LAC_SDIST

import spacy_cner.pretrained.lac as lac_module
from spacy_cner.cli import app
from spacy_cner.pretrained import fetch
from spacy_cner.long_docs import SENTENCE_ENDS
from spacy_cner.pretrained.lac import LacFiles, network_shapes, open_lac
from spacy_cner.pretrained.lac_analyzer import (
    ENTITY_POS,
    LacTagger,
    _char_kind,
    read_words,
    words_and_tags,
    segmenter_from_sdist,
    tagger_from_sdist,
    text_windows,
)
from spacy_cner.pretrained.lac_pipeline import LacTaggerComponent, LacTokenizer, annotate, build_pipeline
from spacy_cner.pretrained.paddle_tensor import write_tensor

from test_lac import VOCAB, WIDTH, spec_of, write_fake_sdist

POS = "a ad an c d f m n nr ns nt nw nz p q r s t u v vd vn w xc".split()
# tag.dic as LAC 2.1.2 writes it: B/I of 24 POS, then the entity names on the ids of nr, ns, nt, t, then O.
TAG_DIC = (
    [f"{2 * i + j}\t{pos}-{'BI'[j]}" for i, pos in enumerate(POS) for j in range(2)]
    + [f"{16 + j}\tPER-{'BI'[j]}" for j in range(2)]
    + [f"{18 + j}\tLOC-{'BI'[j]}" for j in range(2)]
    + [f"{20 + j}\tORG-{'BI'[j]}" for j in range(2)]
    + [f"{34 + j}\tTIME-{'BI'[j]}" for j in range(2)]
    + ["48\tO"]
)
LAC_TAGS = [f"{pos}-{b}" for pos in POS for b in "BI"] + ["O"]
for ident, name in ((16, "PER"), (18, "LOC"), (20, "ORG"), (34, "TIME")):
    LAC_TAGS[ident], LAC_TAGS[ident + 1] = f"{name}-B", f"{name}-I"
SEG_TAGS = ["-B", "-I", "-E", "-S"]
SEG_VOCAB = [" ", "张", "三", "北", "京", "上", "海", "OOV"]
SEG_DIC = ["张三 5", "北京 10", "北京市 3", "上海 8", "去了 2"]
HIDDEN = 3
SIZES = {"lac_model": (len(VOCAB), WIDTH, HIDDEN, 49), "seg_model": (len(SEG_VOCAB), 3, 3, 4)}
TEXTS = ["张三去了北京市", "上海", "张三 在  北京，１２ab", "", "萬與北京"]


def fake_network_tensors(model: str, seed: int = 0) -> dict:
    """Random tensors of one network in LAC's file layout and tiny sizes (SIZES); the tagger's emission
    bias favours PER-B, so the fabricated pipeline finds entities."""
    vocab, width, hidden, tags = SIZES[model]
    rng = numpy.random.default_rng(seed)
    tensors = {"word_emb": rng.normal(0, 1, (vocab, width))}
    for index in range(4):
        tensors[f"fc_{index}.w_0"] = rng.normal(0, 0.5, (width if index < 2 else 2 * hidden, 3 * hidden))
        tensors[f"fc_{index}.b_0"] = rng.normal(0, 0.1, (3 * hidden,))
        tensors[f"gru_{index}.w_0"] = rng.normal(0, 0.5, (hidden, 3 * hidden))
        tensors[f"gru_{index}.b_0"] = rng.normal(0, 0.1, (1, 3 * hidden))
    tensors["fc_4.w_0"] = rng.normal(0, 0.5, (2 * hidden, tags))
    tensors["fc_4.b_0"] = rng.normal(0, 0.1, (tags,))
    if model == "lac_model":
        tensors["fc_4.b_0"][LAC_TAGS.index("PER-B")] += 1.0
    tensors["crfw"] = rng.normal(0, 0.5, (tags + 2, tags))
    return {name: value.astype("float32") for name, value in tensors.items()}


def network_files(seed: int = 0) -> dict:
    files = {}
    for model in SIZES:
        files.update(
            {f"{model}/model/{name}": write_tensor(value) for name, value in fake_network_tensors(model, seed).items()}
        )
    files["lac_model/conf/tag.dic"] = ("\n".join(TAG_DIC) + "\n").encode("utf8")
    files["lac_model/conf/small_seg.dic"] = ("\n".join(SEG_DIC) + "\n").encode("utf8")
    files["seg_model/conf/tag.dic"] = "".join(f"{i}\t{tag}\n" for i, tag in enumerate(SEG_TAGS)).encode("utf8")
    files["seg_model/conf/word.dic"] = "".join(f"{i}\t{token}\n" for i, token in enumerate(SEG_VOCAB)).encode("utf8")
    files["seg_model/conf/q2b.dic"] = "萬\t万\n".encode("utf8")
    return files


@pytest.fixture
def lac_sizes(monkeypatch):
    for name, value in {
        "VOCAB_SIZE": len(VOCAB),
        "EMB_WIDTH": WIDTH,
        "HIDDEN_WIDTH": HIDDEN,
        "SEG_VOCAB_SIZE": len(SEG_VOCAB),
        "SEG_WIDTH": 3,
    }.items():
        monkeypatch.setattr(lac_module, name, value)


@pytest.fixture
def fake_lac_networks(tmp_path, monkeypatch, lac_sizes):
    """A fabricated sdist with both networks that open_lac accepts (its hash patched in)."""
    path = write_fake_sdist(tmp_path / "LAC-2.1.2.tar.gz", extra=network_files())
    monkeypatch.setattr(lac_module, "LAC_SDIST", spec_of(path))
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "cache"))
    return path


def analysis(doc):
    return [(t.text, t.tag_, t.whitespace_) for t in doc], [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def test_the_networks_tensor_files_are_checked_naming_the_file(tmp_path, lac_sizes):
    assert network_shapes("lac_model")["lac_model/model/crfw"] == (51, 49)
    files = network_files()
    files["lac_model/model/gru_2.w_0"] = write_tensor(numpy.zeros((HIDDEN, 2 * HIDDEN), "float32"))
    lac = LacFiles(write_fake_sdist(tmp_path / "a.tar.gz", extra=files))
    with pytest.raises(ValueError, match=r"a.tar.gz:lac_model/model/gru_2.w_0: shape \(3, 6\), expected \(3, 9\)"):
        lac.network("lac_model")
    assert lac.tags("lac_model") == LAC_TAGS and lac.tags("seg_model") == SEG_TAGS
    files["lac_model/conf/tag.dic"] = b"0\ta-B\n"
    with pytest.raises(ValueError, match="tags for 1 ids, expected 49"):
        LacFiles(write_fake_sdist(tmp_path / "b.tar.gz", extra=files)).tags("lac_model")
    with pytest.raises(ValueError, match="No LAC network 'rank_model'"):
        network_shapes("rank_model")


def test_pipeline_tags_as_the_tagger_saves_and_loads_offline(fake_lac_networks, tmp_path):
    lac = open_lac(fake_lac_networks)
    tagger = tagger_from_sdist(lac)
    nlp = build_pipeline(lac)
    docs = list(nlp.pipe(TEXTS, batch_size=2))
    assert [analysis(doc) for doc in docs] == [analysis(nlp(text)) for text in TEXTS]
    read = [read_words(text, char_tags) for text, char_tags in zip(TEXTS, tagger.char_tags(TEXTS))]
    for text, doc, (words, tags) in zip(TEXTS, docs, read):
        assert doc.text == text
        assert [t.text for t in doc if not t.is_space] == [w.strip() for w in words if w.strip()]
        assert [t.tag_ for t in doc if not t.is_space] == [
            ENTITY_POS.get(tag, tag) for w, tag in zip(words, tags) if w.strip()
        ]
        assert [(e.text, e.label_) for e in doc.ents] == [
            (w.strip(), tag) for w, tag in zip(words, tags) if tag in ENTITY_POS
        ]
    assert any(doc.ents for doc in docs)
    assert nlp.meta["sources"][-1]["license"] == "Apache-2.0" and "LAC" in nlp.meta["description"]
    nlp.to_disk(tmp_path / "pipeline")
    fake_lac_networks.unlink()  # loading needs no sdist
    loaded = spacy.load(tmp_path / "pipeline")
    assert [analysis(doc) for doc in loaded.pipe(TEXTS)] == [analysis(doc) for doc in docs]
    assert "LAC" in loaded.meta["sources"][-1]["name"]
    again = spacy.blank("zh", config=nlp.config).from_bytes(nlp.to_bytes())
    assert [analysis(again(text)) for text in TEXTS] == [analysis(doc) for doc in docs]


def test_a_tampered_pipeline_is_refused_naming_the_file(fake_lac_networks, tmp_path):
    """Issue 85: the weights, lexicon and segment dictionary are checked against their sha256 in cfg.json (a
    weight scaled by 1.5 loaded and tagged otherwise, with no error); a file that cannot be read is named."""
    import shutil

    nlp = build_pipeline(open_lac(fake_lac_networks))
    nlp.to_disk(tmp_path / "good")
    expected = [analysis(doc) for doc in nlp.pipe(TEXTS)]

    def scaled(path):
        with numpy.load(path) as arrays:
            values = {name: arrays[name] * (1.5 if name == "emission.weight" else 1) for name in arrays.files}
        numpy.savez(path, **values)

    def edit_json(change):
        def edit(path):
            data = json.loads(path.read_text(encoding="utf8"))
            change(data)
            path.write_text(json.dumps(data), encoding="utf8")

        return edit

    def resize(data):
        data["hidden_width"] += 1
        data.pop("sha256")

    cases = [
        ("weights.npz", scaled, r"weights.npz does not match the checksum saved with it in .*cfg.json"),
        ("weights.npz", lambda p: p.write_bytes(p.read_bytes()[:1000]), "weights.npz does not match the checksum"),
        ("lexicon.json", edit_json(lambda d: d["tags"].reverse()), "lexicon.json does not match the checksum"),
        (
            "segment_dictionary.json",
            edit_json(lambda d: d.update(total_count=d["total_count"] + 1)),
            "segment_dictionary.json does not match the checksum",
        ),
        ("cfg.json", lambda p: p.write_text("{", encoding="utf8"), r"cfg.json is not valid JSON"),
        ("cfg.json", edit_json(resize), r"weights.npz cannot be read as the weights of the network .*cfg.json sizes"),
    ]
    for index, (name, tamper, message) in enumerate(cases):
        copy = tmp_path / f"copy{index}"
        shutil.copytree(tmp_path / "good", copy)
        tamper(copy / "lac_tagger" / name)
        with pytest.raises(ValueError, match=message) as error:
            spacy.load(copy)
        assert str(copy / "lac_tagger") in str(error.value)
    # A pipeline written before the checksums (none in its cfg.json) still loads.
    edit_json(lambda d: d.pop("sha256"))(tmp_path / "good" / "lac_tagger" / "cfg.json")
    assert [analysis(doc) for doc in spacy.load(tmp_path / "good").pipe(TEXTS)] == expected
    with pytest.raises(ValueError, match="lac_tagger's bytes: weights.npz does not match the checksum"):
        data = srsly.msgpack_loads(nlp.get_pipe("lac_tagger").to_bytes())
        data["weights"] = data["weights"][:-1]
        LacTaggerComponent(nlp.vocab).from_bytes(srsly.msgpack_dumps(data))


def test_chars_gives_a_token_per_character_with_its_words_tag_and_the_same_entities(fake_lac_networks):
    lac = open_lac(fake_lac_networks)
    words_nlp, chars_nlp = build_pipeline(lac), build_pipeline(lac, tokens="chars")
    for text in TEXTS:
        by_word, by_char = words_nlp(text), chars_nlp(text)
        assert [t.text for t in by_char] == [c for c in text if c != " "] or all(len(t) == 1 for t in by_char)
        for token in by_char:
            word = next(w for w in by_word if w.idx <= token.idx < w.idx + max(len(w.text_with_ws), 1))
            assert token.tag_ == word.tag_
        assert [(e.start_char, e.end_char, e.label_) for e in by_char.ents] == [
            (e.start_char, e.end_char, e.label_) for e in by_word.ents
        ]


def test_make_doc_keeps_whitespace_spacy_style_and_entities_off_it():
    """As spaCy's tokenizers: a single space after a word becomes its token's whitespace, other whitespace a
    token of its own (with the tag of the LAC word holding it); an entity word loses its surrounding whitespace;
    LAC's "" tag (O) stays empty."""
    tokenizer = LacTokenizer(spacy.blank("zh").vocab)
    text = "张三 在  北京 ok"
    words, tags = ["张三 ", "在", "  ", "北京 ", "ok"], ["PER", "p", "w", "LOC", ""]
    doc = tokenizer.make_doc(text, words, tags)
    assert [(t.text, t.whitespace_, t.tag_) for t in doc] == [
        ("张三", " ", "nr"),
        ("在", " ", "p"),
        (" ", "", "w"),
        ("北京", " ", "ns"),
        ("ok", "", ""),
    ]
    assert [(e.text, e.label_) for e in doc.ents] == [("张三", "PER"), ("北京", "LOC")]


# The issue's texts (81, item 3) with the character tags LAC 2.1.2's tagger gives them (the real sdist, windowed).
ISSUE_TAGS = {
    "去了上海迪士尼，排队3小时 #周末# @张伟": "v-B u-B ORG-B ORG-I ORG-I ORG-I ORG-I w-B v-B v-I m-B "
    "O -I O O O -I O O O PER-B PER-I",
    "我爱北京😊天安门": "r-B v-B LOC-B LOC-I LOC-I LOC-I LOC-I LOC-I",
    "张三\n李四在上海": "PER-B PER-I PER-I PER-B PER-I p-B LOC-B LOC-I",
}


def test_untagged_text_whitespace_and_emoji_never_join_a_word_nor_an_entity():
    """LAC's O tag continues the word before it, which then takes O's empty tag ('3小时 #周末# @' with tag ''),
    and its entities may hold an emoji or a line break: read_words splits them off, each with a tag."""
    expected = {
        "去了上海迪士尼，排队3小时 #周末# @张伟": [
            ("去", "v"), ("了", "u"), ("上海迪士尼", "ORG"), ("，", "w"), ("排队", "v"), ("3", "m"), ("小时", "x"),
            (" ", "_SP"), ("#", "w"), ("周末", "x"), ("#", "w"), (" ", "_SP"), ("@", "w"), ("张伟", "PER"),
        ],
        "我爱北京😊天安门": [("我", "r"), ("爱", "v"), ("北京", "LOC"), ("😊", "w"), ("天安门", "LOC")],
        "张三\n李四在上海": [("张三", "PER"), ("\n", "_SP"), ("李四", "PER"), ("在", "p"), ("上海", "LOC")],
    }  # fmt: skip
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1"}}})
    for text, tags in ISSUE_TAGS.items():
        char_tags = tags.split(" ")
        assert len(char_tags) == len(text), text
        assert words_and_tags(text, char_tags) != read_words(text, char_tags)  # LAC's own reading differs
        assert list(zip(*read_words(text, char_tags))) == expected[text]
        for merge in (True, False):
            doc = annotate(nlp.make_doc(text), *read_words(text, char_tags), merge=merge)
            assert all(token.tag_ for token in doc), [(t.text, t.tag_) for t in doc]
            assert all(token.tag_ == "_SP" for token in doc if token.is_space)
            for ent in doc.ents:
                assert not any(char.isspace() or char == "😊" for char in ent.text), ent.text
    text = "我爱北京😊天安门"
    doc = annotate(nlp.make_doc(text), *read_words(text, ISSUE_TAGS[text].split()), merge=True)
    assert [(e.text, e.label_) for e in doc.ents] == [("北京", "LOC"), ("天安门", "LOC")]


def test_annotate_is_linear_in_the_doc_length():
    """Issue 85: with tokens "words" a long doc took quadratic time (spaCy's retokenizer checks each merge against
    a list of the earlier ones; char_span joins the doc's text): 4x the characters took 3.7x the time per
    character at 20k characters. The time per character stays within 2x of that of a 4x shorter doc."""
    import time

    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.ChineseTokenizer.v1"}}})

    def seconds_per_char(n: int, merge: bool) -> float:
        words, tags = ["张三", "去了", "北京", "，", "  "] * n, ["PER", "v", "LOC", "w", "_SP"] * n
        text = "".join(words)
        best = float("inf")
        for _ in range(2):
            doc = nlp.make_doc(text)
            start = time.process_time()
            doc = annotate(doc, words, tags, merge=merge)
            best = min(best, time.process_time() - start)
        assert len(doc.ents) == 2 * n and doc.text == text
        return best / len(text)

    for merge in (True, False):
        assert seconds_per_char(8000, merge) < 2 * seconds_per_char(2000, merge)


@pytest.mark.parametrize(
    "text,tags,expected",
    [
        # A single space inside a word LAC reads across it stays there; two spaces, or one LAC starts a word at, cut.
        ("Hong Kong", "LOC-B LOC-I LOC-I LOC-I LOC-I LOC-I LOC-I LOC-I LOC-I", [("Hong Kong", "LOC")]),
        ("ab  cd", "ORG-B ORG-I ORG-I ORG-I ORG-I ORG-I", [("ab", "ORG"), ("  ", "_SP"), ("cd", "ORG")]),
        ("ab cd", "n-B n-I w-B n-B n-I", [("ab", "n"), (" ", "_SP"), ("cd", "n")]),
        # An emoji sequence (joiners, a flag's two regional indicators, a variation selector) is one word.
        ("👨\u200d👩\u200d👧在🇨🇳❤\ufe0f", "O O O O O p-B O O O O", [
            ("👨\u200d👩\u200d👧", "w"), ("在", "p"), ("🇨🇳", "w"), ("❤\ufe0f", "w"),
        ]),
        # An untagged dictionary word (O then -I) is one word, cut at its symbols; a tagged word after an untagged
        # one starts anew (LAC continues it); a control character or U+FFFD stands alone.
        ("小时/x", "O -I -I -I", [("小时", "x"), ("/", "w"), ("x", "x")]),
        ("ab北京", "O -I LOC-I LOC-I", [("ab", "x"), ("北京", "LOC")]),
        ("面\x86\ufffd部", "n-B n-I n-I n-I", [("面", "n"), ("\x86", "w"), ("\ufffd", "w"), ("部", "n")]),
        # What LAC reads as one word and is neither: left as LAC has it.
        ("二○一○年", "TIME-B TIME-I TIME-I TIME-I TIME-I", [("二○一○年", "TIME")]),
    ],
)  # fmt: skip
def test_read_words_departs_from_lac_only_where_documented(text, tags, expected):
    char_tags = tags.split(" ")
    assert len(char_tags) == len(text)
    words, word_tags = read_words(text, char_tags)
    assert "".join(words) == text and list(zip(words, word_tags)) == expected


def test_read_tagged_words_is_read_words_vectorised():
    """The pipeline reads words from tag-id arrays (read_tagged_words, numpy) where read_words reads the tags'
    strings: the same words and tags on random texts of Han characters, letters, digits, whitespace,
    punctuation, emoji sequences, controls and characters beyond the BMP, with random tags and id starts."""
    import random

    from spacy_cner.pretrained.lac_analyzer import LacTagSet, read_tagged_words

    tag_set = LacTagSet(LAC_TAGS)
    rng = random.Random(0)
    plain = list("张三北京 　\n\t，。!?#@/ab12")
    others = ["😊", "\u200d", "\x86", "\ufffd", "🇨", "🇳", "\ufe0f", "𠀀", "ล่"]
    for trial in range(3000):
        text = "".join(rng.choice(plain if trial % 2 else plain + others) for _ in range(rng.randint(0, 12)))
        tag_ids = numpy.asarray([rng.randrange(len(LAC_TAGS)) for _ in text], dtype="int64")
        first = numpy.asarray([not i or rng.random() < 0.6 for i in range(len(text))], dtype=bool)
        expected = read_words(text, tag_set.char_tags(tag_ids, first))
        assert read_tagged_words(text, tag_ids, first, tag_set) == expected, (text, tag_ids, first)


def test_a_doc_gets_the_same_analysis_alone_in_any_batch_and_sentence_by_sentence(fake_lac_networks):
    """Each sentence is read alone: a text of several sentences is tagged as its sentences one by one, and a
    sentence longer than window_size in overlapping windows that still tag every character once."""
    nlp = build_pipeline(open_lac(fake_lac_networks))
    texts = TEXTS + ["张三去了北京市。上海！萬與北京\n张三 在  北京", "北京市" * 40]
    alone = [analysis(nlp(text)) for text in texts]
    for batch_size in (1, 3, 100):
        assert [analysis(doc) for doc in nlp.pipe(texts, batch_size=batch_size)] == alone
    tagger = nlp.get_pipe("lac_tagger").tagger
    sentences = ["张三去了北京市。", "上海！", "萬與北京\n", "张三 在  北京"]
    assert tagger.windowed_char_tags(["".join(sentences)], 256) == [sum(tagger.char_tags(sentences), [])]
    assert tagger.windowed_char_tags(sentences, 256) == tagger.char_tags(sentences)
    long_text = texts[-1]
    windows = text_windows(long_text, 16)
    assert len(windows) > 2 and windows[0].end > windows[1].start  # overlapping
    expected = sum(
        (
            tagger.char_tags([long_text[w.start : w.end]])[0][w.own_start - w.start : w.own_end - w.start]
            for w in windows
        ),
        [],
    )
    assert tagger.windowed_char_tags([long_text], 16) == [expected] and len(expected) == len(long_text)
    doc = build_pipeline(open_lac(fake_lac_networks), window_size=16)(long_text)
    words, tags = read_words(long_text, expected)
    assert [t.text for t in doc] == words and [t.tag_ for t in doc] == [ENTITY_POS.get(tag, tag) for tag in tags]


def test_pipelines_written_with_lac_tokenizer_still_load_and_agree(fake_lac_networks, tmp_path):
    lac = open_lac(fake_lac_networks)
    old = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.LacTokenizer.v1"}}})
    old.tokenizer.tagger = tagger_from_sdist(lac)
    old.to_disk(tmp_path / "old")
    loaded = spacy.load(tmp_path / "old")
    new = build_pipeline(lac)
    assert [analysis(doc) for doc in loaded.pipe(TEXTS)] == [analysis(new(text)) for text in TEXTS]


def test_a_tokenizer_without_weights_or_files_says_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="lac_tagger has no weights: load a pipeline written by"):
        LacTaggerComponent(spacy.blank("zh").vocab)(spacy.blank("zh")("张三"))
    with pytest.raises(ValueError, match="weights.npz missing: not the pipeline's lac_tagger/ folder"):
        LacTaggerComponent(spacy.blank("zh").vocab).from_disk(tmp_path)
    with pytest.raises(ValueError, match="tokens must be one of"):
        spacy.blank("zh").add_pipe("lac_tagger", config={"tokens": "bytes"})
    with pytest.raises(ValueError, match="has no weights: load a pipeline written by"):
        LacTokenizer(spacy.blank("zh").vocab)("张三")
    with pytest.raises(ValueError, match="cfg.json, lexicon.json, segment_dictionary.json, weights.npz missing"):
        LacTokenizer(spacy.blank("zh").vocab).from_disk(tmp_path)
    with pytest.raises(ValueError, match="tokens must be one of"):
        spacy.blank(
            "zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy-cner.LacTokenizer.v1", "tokens": "bytes"}}}
        )


def test_cli_writes_a_pipeline_that_loads(fake_lac_networks, tmp_path):
    runner = CliRunner()
    out = tmp_path / "out" / "zh_lac"  # as the help's out/zh_lac: a folder whose parent does not exist yet
    result = runner.invoke(
        app, ["pretrained", "pipeline", str(out), "--sdist", str(fake_lac_networks), "--tokens", "chars"]
    )
    assert result.exit_code == 0, result.output
    nlp = spacy.load(out)
    assert nlp.config["components"]["lac_tagger"]["tokens"] == "chars" and len(nlp("张三去了北京市")) == 7
    result = runner.invoke(app, ["pretrained", "pipeline", str(out), "--sdist", str(fake_lac_networks)])
    assert result.exit_code == 1 and "is not an empty folder (--force rewrites" in result.output
    result = runner.invoke(app, ["pretrained", "pipeline", str(out), "--sdist", str(fake_lac_networks), "--force"])
    assert result.exit_code == 0, result.output
    assert spacy.load(out).config["components"]["lac_tagger"]["tokens"] == "words"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["pretrained", "pipeline", str(tmp_path / "mine"), "--force"])
    assert result.exit_code == 1 and "nor a pipeline this command wrote" in result.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"
    result = runner.invoke(app, ["pretrained", "pipeline", str(tmp_path / "x"), "--tokens", "bytes"])
    assert result.exit_code == 1 and "--tokens must be one of" in result.output


def test_cli_installs_a_package_that_loads_by_name_from_anywhere(fake_lac_networks, tmp_path):
    """`pretrained pipeline zh_NAME` builds the pipeline as a wheel and pip installs it (here --target, not this
    environment): another process in another folder loads it by name, with its model card; a rerun needs --force."""
    import subprocess
    import sys

    runner = CliRunner()
    site = tmp_path / "site"
    command = ["pretrained", "pipeline", "zh_lac_test", "--sdist", str(fake_lac_networks), "--target", str(site)]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "Installed zh_lac_test 2.1.2" in result.output
    readme = (site / "zh_lac_test" / "zh_lac_test-2.1.2" / "README.md").read_text(encoding="utf8")
    for expected in ("Zero-shot scores", "| `PER` | Person name", "| `nr` |", "Apache-2.0", "ent._.score"):
        assert expected in readme
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import spacy; nlp = spacy.load('zh_lac_test'); doc = nlp('上海'); "
        "print(nlp.meta['name'], [(e.text, e.label_, 0 < e._.score <= 1) for e in doc.ents], spacy.explain('nr'))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lac_test [('上海', 'PER', True)] person name (人名: LAC's PER entities)"
    result = runner.invoke(app, command)
    assert result.exit_code == 1 and "zh_lac_test 2.1.2 in" in result.output and "--force" in result.output
    result = runner.invoke(app, command + ["--force", "--tokens", "chars"])
    assert result.exit_code == 0, result.output
    config = (site / "zh_lac_test" / "zh_lac_test-2.1.2" / "config.cfg").read_text(encoding="utf8")
    assert 'tokens = "chars"' in config
    for bad, message in (("lac", "is not a package name"), ("zh-lac", "is not a package name")):
        result = runner.invoke(app, ["pretrained", "pipeline", bad])
        assert result.exit_code == 1 and message in result.output
    result = runner.invoke(app, ["pretrained", "pipeline", str(tmp_path / "folder"), "--target", str(site)])
    assert result.exit_code == 1 and "--target installs a package" in result.output


def test_ent_score_is_the_entitys_probability_under_lacs_crf(fake_lac_networks):
    """ent._.score against the CRF's distribution summed by brute force over every tag sequence of the ids."""
    nlp = build_pipeline(open_lac(fake_lac_networks))
    tagger = nlp.get_pipe("lac_tagger").tagger
    tag_ids = {tag: ident for ident, tag in enumerate(tagger.lexicon.tags)}
    crf = tagger.network.crf_weights.double()
    start, end, transitions = crf[0], crf[1], crf[2:]
    for text, label, expected_ids in (("上海", "PER", [12]), ("萬與北京", "PER", [7, 8, 11])):
        (ent,) = nlp(text).ents
        assert tagger.ids(text)[0] == expected_ids and ent.start_char == 0 and ent.label_ == label
        ids = torch.tensor([expected_ids])
        emit = tagger.network(ids, torch.tensor([len(expected_ids)]))[0].double()
        # shape: (n_tags,) * length, the score of every tag sequence
        scores = start.reshape([-1] + [1] * (len(expected_ids) - 1)) + end.reshape([1] * (len(expected_ids) - 1) + [-1])
        for t in range(len(expected_ids)):
            scores = scores + emit[t].reshape([1] * t + [-1] + [1] * (len(expected_ids) - 1 - t))
            if t:
                shape = [1] * len(expected_ids)
                shape[t - 1], shape[t] = -1, transitions.shape[1]
                scores = scores + transitions.reshape(shape)
        probabilities = torch.softmax(scores.reshape(-1), 0).reshape(scores.shape)
        begin, inside = tag_ids[f"{label}-B"], tag_ids[f"{label}-I"]
        chosen = probabilities[begin]  # the entity is its first id: tagged L-B, the next one not L-I
        expected = chosen.sum() if len(expected_ids) == 1 else chosen.sum() - chosen[inside].sum()
        assert ent._.score == pytest.approx(float(expected), rel=1e-6)
    texts = TEXTS + ["张三去了北京市。上海！萬與北京\n张三 在  北京"]
    alone = [[(e.start_char, e.end_char, e._.score) for e in nlp(text).ents] for text in texts]
    together = [[(e.start_char, e.end_char, e._.score) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=4)]
    assert [[s[:2] for s in doc] for doc in together] == [[s[:2] for s in doc] for doc in alone]
    for doc_alone, doc_together in zip(alone, together):
        assert [s[2] for s in doc_together] == pytest.approx([s[2] for s in doc_alone], rel=1e-5)
        assert all(0.0 < s[2] <= 1.0 for s in doc_alone)
    nlp.get_pipe("lac_tagger").cfg["scores"] = False
    assert all(ent._.score is None for ent in nlp("上海").ents)


@pytest.mark.parametrize("command", ["pipeline", "vectors"])
def test_cli_checks_the_output_before_the_build(tmp_path, command):
    """Issue 85: an output that cannot be written failed with an OSError's traceback after the 13 s build; it is
    said in one line first (the sdist named here does not exist: the build would fail otherwise)."""
    runner = CliRunner()
    (tmp_path / "file").write_text("a file")
    extra = ["--missing", "none"] if command == "vectors" else []
    cases = ((tmp_path / "file" / "out", "Cannot write the output folder"), (tmp_path / "file", "is not an empty"))
    for output, message in cases:
        arguments = ["pretrained", command, str(output), "--sdist", str(tmp_path / "missing.tar.gz"), *extra]
        result = runner.invoke(app, arguments)
        assert result.exit_code == 1 and message in result.output, result.output
        assert "Traceback" not in result.output and "missing.tar.gz" not in result.output


def test_segmenter_from_a_fabricated_sdist_cuts_every_character_once(fake_lac_networks):
    segmenter = segmenter_from_sdist(open_lac(fake_lac_networks))
    for text, words in zip(TEXTS, segmenter(TEXTS)):
        assert "".join(words) == text


REAL = REAL_LAC_SDIST  # the user's cache (the tests' own is empty: conftest)
REFERENCE = Path(__file__).parent / "data" / "lac_reference.json"


@pytest.mark.slow
@pytest.mark.skipif(
    not REAL.exists(),
    reason=f"the real LAC sdist is not in the cache ({REAL}): `python -m spacy_cner pretrained fetch` puts it there",
)
def test_torch_lac_reproduces_lacs_own_outputs():
    """data/lac_reference.json: 313 texts (the README's examples, 10 written to probe full-width forms,
    traditional characters, spaces, emoji, one character; 160 from MSRA's test split, 50 Youku, 50
    E-commerce, 20 People's Daily, 10 Resume, 10 Taobao, all test splits) with the words and tags LAC 2.1.2
    itself gave in `lac` mode and the words in `seg` mode: its own Python code (models.py, reader.py,
    segment.py) unchanged over paddlepaddle 2.6.2's inference predictor on CPU (a paddle.fluid shim
    mapping AnalysisConfig / create_paddle_predictor to paddle.inference), in batches of 32.
    All 313 agree exactly in both modes (and so did all 12,440 sentences of those test splits, checked once
    outside the repository)."""
    reference = json.loads(REFERENCE.read_text(encoding="utf8"))["sentences"]
    lac = open_lac(REAL)
    tagger, segmenter = tagger_from_sdist(lac), segmenter_from_sdist(lac)
    texts = [record["text"] for record in reference]
    tagged = [result for start in range(0, len(texts), 32) for result in tagger(texts[start : start + 32])]
    segmented = [words for start in range(0, len(texts), 32) for words in segmenter(texts[start : start + 32])]
    for record, (words, tags), seg_words in zip(reference, tagged, segmented):
        assert (words, tags) == (record["lac_words"], record["lac_tags"]), record["text"]
        assert seg_words == record["seg_words"], record["text"]
    nlp = build_pipeline(lac)
    # The pipeline reads each sentence alone and its words as read_words does: it agrees with LAC reading the whole
    # text except where a text holds a sentence end before its last character (1 of the 313: "...侧漏！选自己..."),
    # or LAC gives a word no tag (O), a word holds whitespace other than one inner space, or a character
    # read_words keeps apart (an emoji): 6 of the 313.
    departed = 0
    for record, doc in zip(reference, nlp.pipe(texts)):
        expected = [
            (w.strip(), ENTITY_POS.get(t, t)) for w, t in zip(record["lac_words"], record["lac_tags"]) if w.strip()
        ]
        if [(t.text, t.tag_) for t in doc if not t.is_space] != expected:
            departed += 1
            assert (
                any(char in SENTENCE_ENDS for char in record["text"][:-1])
                or "" in record["lac_tags"]
                or any(w.strip() != w or "  " in w or "\n" in w or "\u3000" in w for w in record["lac_words"])
                or any(_char_kind(char) != "text" for char in record["text"])
            ), record["text"]
    assert departed == 6
    for text, tags in ISSUE_TAGS.items():
        assert tagger.windowed_char_tags([text], 256) == [tags.split(" ")]
    doc = nlp("百度是一家高科技公司")  # the README's example
    assert [(t.text, t.tag_) for t in doc] == [
        ("百度", "nt"),
        ("是", "v"),
        ("一家", "m"),
        ("高科技", "n"),
        ("公司", "n"),
    ]
    assert [(e.text, e.label_) for e in doc.ents] == [("百度", "ORG")]


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_ready_model_snippet():
    """The README's bash block of the ready model (after "With no training at all"): its two commands, and the
    output the text after it says the second prints."""
    import re

    text = README.read_text(encoding="utf8")
    found = re.search(r"With no training at all.*?```bash\n(.*?)```\n\nprints `(.*?)`", text, flags=re.S)
    assert found is not None, "README.md: the ready model's snippet and what it prints"
    install, check = found.group(1).strip().splitlines()
    return install, check, found.group(2)


@pytest.mark.slow
@pytest.mark.skipif(not REAL.exists(), reason=f"the real LAC sdist is not in the cache ({REAL})")
def test_readme_ready_model_snippet_prints_what_it_says(tmp_path):
    """The README's two lines as written (the package installed with --target, not into this environment), run
    from another folder: the second prints what the README says."""
    import shlex
    import subprocess
    import sys

    install, check, printed = readme_ready_model_snippet()
    assert install == "python -m spacy_cner pretrained pipeline zh_lac"
    words = shlex.split(install)
    command = [sys.executable, *words[1:], "--sdist", str(REAL), "--target", str(tmp_path / "site")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    code = shlex.split(check)[-1]
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == printed


def test_lac_tagger_runs_lacs_network_on_its_threads(fake_lac_networks, monkeypatch):
    """lac_tagger (and LacTokenizer) run LAC's network on their torch_threads (1 by default; None: the process's),
    the caller's count back after each batch, the same entities and scores either way."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # as torch's default on a 2-core machine
    try:
        run_lac_tagger_threads(fake_lac_networks, monkeypatch)
    finally:
        torch.set_num_threads(previous)


def run_lac_tagger_threads(fake_lac_networks, monkeypatch):
    nlp = build_pipeline(open_lac(fake_lac_networks))
    seen = []
    analyse, tag = LacTagger.windowed_analysis, LacTagger._tag

    def recorded(function):
        def wrapper(self, *args, **kwargs):
            seen.append(torch.get_num_threads())
            return function(self, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(LacTagger, "windowed_analysis", recorded(analyse))
    monkeypatch.setattr(LacTagger, "_tag", recorded(tag))
    texts = ["张三去了北京市", "李四在上海工作"]
    docs = list(nlp.pipe(texts, batch_size=1))
    assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    component = nlp.get_pipe("lac_tagger")
    component.torch_threads = None
    seen.clear()
    again = list(nlp.pipe(texts))
    assert set(seen) == {2}
    assert [[(e.text, e.label_, e._.score) for e in d.ents] for d in again] == [
        [(e.text, e.label_, e._.score) for e in d.ents] for d in docs
    ]
    tokenizer = LacTokenizer(nlp.vocab, tagger=component.tagger)
    seen.clear()
    tokenizer("张三去了北京市")
    assert seen == [1] and torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="LacTokenizer: torch_threads"):
        LacTokenizer(nlp.vocab, torch_threads=0)
