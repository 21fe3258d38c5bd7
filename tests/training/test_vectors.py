"""`python -m spacy_cner train-vectors`: character and bigram vectors trained on the train split's own text."""

import numpy
import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import load_config
from typer.testing import CliRunner

from spacy_cner.cli import app
from spacy_cner.training.vectors import VectorSettings, make_self_trained_vectors, read_texts, train_vectors
from spacy_cner.training.vectors import vectors_pipeline

from conftest import REPO_ROOT

pytest.importorskip("gensim", reason='train-vectors needs gensim: pip install -e ".[test]" installs it')

TEXTS = ["张三去了上海", "李四去了北京", "张三在上海工作", "王五在北京工作"] * 3
SMALL = VectorSettings(width=8, epochs=2, min_count=2, seed=0)


def write_corpus(path, texts=TEXTS):
    nlp = spacy.blank("zh")
    DocBin(docs=[Example.from_dict(nlp.make_doc(t), {"entities": []}).reference for t in texts]).to_disk(path)
    return path


def test_vectors_of_every_character_and_bigram_seen_min_count_times(tmp_path):
    train = write_corpus(tmp_path / "train.spacy")
    extra = tmp_path / "unlabeled.txt"
    extra.write_bytes("\ufeff赵六去了广州\r\n\r\n赵六在广州工作\r\n".encode("utf8"))  # BOM, CRLF, an empty line
    summary = train_vectors([train, extra], tmp_path / "vectors", SMALL)
    assert (summary.texts, summary.characters) == (14, sum(map(len, TEXTS)) + 13)
    vectors = spacy.load(tmp_path / "vectors").vocab.vectors
    assert vectors.shape == (summary.char_vectors + summary.bigram_vectors, 8)
    for key in ("张", "广", "张三", "去了", "广州"):  # 广州 twice, in the unlabeled text only
        assert vectors.find(key=key) >= 0, key
    for key in ("张三去", "海李"):  # no trigrams; no bigram across two texts
        assert vectors.find(key=key) < 0, key
    assert summary.char_vectors == len({c for t in TEXTS + ["赵六去了广州", "赵六在广州工作"] for c in t})
    assert srsly.read_json(tmp_path / "vectors" / "summary.json")["sources"] == [str(train), str(extra)]


def test_the_same_seed_gives_the_same_vectors(tmp_path):
    train = write_corpus(tmp_path / "train.spacy")
    runs = [(seed, tmp_path / f"run{i}") for i, seed in enumerate((0, 0, 1))]
    for seed, out in runs:
        train_vectors([train], out, VectorSettings(width=8, epochs=2, seed=seed))
    first, again, other = (spacy.load(out).vocab.vectors for _, out in runs)
    numpy.testing.assert_array_equal(first.data, again.data)
    assert not numpy.allclose(first.data, other.data)


def test_before_init_trains_the_vectors_train_vectors_would(tmp_path):
    """[initialize.before_init] gives the vocab the vectors `train-vectors` writes for the same text,
    settings and seed; with pretrained vectors named it trains none; without a corpus it says so."""
    train = write_corpus(tmp_path / "train.spacy")
    train_vectors([train], tmp_path / "vectors", SMALL)
    written = spacy.load(tmp_path / "vectors").vocab.vectors
    nlp = spacy.blank("zh")
    callback = make_self_trained_vectors(str(train), width=8, epochs=2, min_count=2, seed=0)
    assert callback(nlp) is nlp
    vectors = nlp.vocab.vectors
    assert vectors.shape == written.shape and vectors.n_keys == written.n_keys
    for key in ("张", "张三", "去了", "北京"):
        numpy.testing.assert_array_equal(vectors[nlp.vocab.strings[key]], written[nlp.vocab.strings[key]])
    assert nlp.vocab.strings[nlp.vocab.strings["张三"]] == "张三"  # the texts are in the string store
    untouched = spacy.blank("zh")
    make_self_trained_vectors(str(train), pretrained=str(tmp_path / "vectors"))(untouched)
    assert untouched.vocab.vectors.shape[0] == 0
    with pytest.raises(ValueError, match=r"corpus \(paths.train\) is null"):
        make_self_trained_vectors(None)(spacy.blank("zh"))
    with pytest.raises(ValueError, match="no .spacy train corpus at"):
        make_self_trained_vectors(str(tmp_path / "missing.spacy"))(spacy.blank("zh"))


def test_before_init_on_a_corpus_too_small_for_min_count_trains_with_1_and_says_so(tmp_path, capsys):
    """The default config must train on a toy or first-round corpus: no character occurs twice here."""
    train = write_corpus(tmp_path / "train.spacy", ["张三去了上海", "我在北京市工作"])
    with pytest.raises(ValueError, match="lower min_count"):
        train_vectors([train], tmp_path / "vectors", SMALL)  # the command keeps the user's min_count
    nlp = spacy.blank("zh")
    make_self_trained_vectors(str(train), width=8, epochs=2, min_count=2, seed=0)(nlp)
    assert "training the vectors with min_count 1" in capsys.readouterr().out
    assert nlp.vocab.vectors.n_keys == len("张三去了上海我在北京市工作") + 5 + 6  # every character and bigram


def test_bad_input_is_named(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes("张三去了上海\n".encode("utf8") + "李四".encode("gb18030") + b"\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 2: not UTF-8"):
        list(read_texts(bad))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf8")
    with pytest.raises(ValueError, match="No text to train vectors on"):
        train_vectors([empty], tmp_path / "out")
    with pytest.raises(ValueError, match="lower min_count"):
        train_vectors([write_corpus(tmp_path / "once.spacy", ["张三"])], tmp_path / "out", VectorSettings(min_count=5))
    with pytest.raises(ValueError, match="VectorSettings.width must be a positive integer, got 0"):
        VectorSettings(width=0)
    with pytest.raises(ValueError, match="3 keys for 2 vectors"):
        vectors_pipeline(["a", "b", "c"], numpy.zeros((2, 4), dtype="f"))


def test_cli_writes_a_vectors_pipeline_and_reports_failures(tmp_path):
    train = write_corpus(tmp_path / "train.spacy")
    runner = CliRunner()
    result = runner.invoke(
        app, ["train-vectors", str(train), str(tmp_path / "vectors"), "--width", "8", "--epochs", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "character and" in result.output and "bigram vectors of width 8" in result.output
    assert spacy.load(tmp_path / "vectors").vocab.vectors.shape[1] == 8
    result = runner.invoke(app, ["train-vectors", str(train), str(tmp_path / "v2"), "--min-count", "100"])
    assert result.exit_code == 1 and "lower min_count" in result.output


def test_the_fast_config_is_pretrain_free_without_its_vectors():
    with_vectors = load_config(REPO_ROOT / "configs" / "pretrain_free.cfg", interpolate=False)
    fast = load_config(REPO_ROOT / "configs" / "fast.cfg", interpolate=False)
    assert fast["components"]["crf_ner"]["model"]["tok2vec"]["static_vectors"] is False
    with_vectors["components"]["crf_ner"]["model"]["tok2vec"]["static_vectors"] = False
    assert with_vectors["initialize"]["before_init"]["@callbacks"] == "spacy-cner.self_trained_vectors.v1"
    assert fast["initialize"]["before_init"] is None
    with_vectors["initialize"]["before_init"] = None
    assert with_vectors == fast


def test_the_default_is_pretrain_free_with_lacs_vectors():
    """configs/default.cfg and pretrain_free.cfg differ in where the vectors come from only."""
    default = load_config(REPO_ROOT / "configs" / "default.cfg", interpolate=False)
    free = load_config(REPO_ROOT / "configs" / "pretrain_free.cfg", interpolate=False)
    assert default["initialize"]["before_init"]["@callbacks"] == "spacy-cner.lac_vectors.v1"
    assert default["paths"].pop("lac_sdist") is None
    default["initialize"]["before_init"] = free["initialize"]["before_init"]
    assert default == free


def test_training_shows_its_progress_over_the_epochs(tmp_path, capsys):
    """train-vectors took 4.4 silent minutes on MSRA: a bar now counts word2vec's epochs, both kinds."""
    train = write_corpus(tmp_path / "train.spacy")
    train_vectors([train], tmp_path / "vectors", VectorSettings(width=8, epochs=3, min_count=1), progress=True)
    err = capsys.readouterr().err
    assert "word2vec, bigram vectors: 100%" in err and "6/6" in err
    train_vectors([train], tmp_path / "quiet", VectorSettings(width=8, epochs=3, min_count=1))
    assert "word2vec" not in capsys.readouterr().err
