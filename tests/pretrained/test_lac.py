"""LAC's weights from its sdist: the paddle tensor reader, the fetch (offline: a local index, a local copy),
the vocabularies, the vectors and the initialize callback, on small fabricated files."""

import hashlib
import io
import tarfile
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from conftest import REAL_LAC_SDIST

import spacy_cner.pretrained.lac as lac_module
import spacy_cner.training.lac_vectors as lac_vectors_module
from spacy_cner.cli import app
from spacy_cner.pretrained import fetch
from spacy_cner.pretrained.fetch import Sdist, fetch_sdist
from spacy_cner.pretrained.lac import LacFiles, char_bigram_vectors, open_lac, parse_q2b, parse_word_dic
from spacy_cner.pretrained.paddle_tensor import read_tensor, write_tensor
from spacy_cner.training.lac_vectors import combine, lac_table, make_lac_vectors
from spacy_cner.training.vectors import VectorSettings


# A fabricated LAC vocabulary: a space first (as LAC's id 0), characters, words, OOV last.
VOCAB = [" ", "张", "三", "北", "京", "上", "海", "万", "与", "1", "张三", "北京", "上海", "北京市", "OOV"]
Q2B = [("萬", "万"), ("與", "与"), ("１", "1"), ("Ａ", "a")]  # Ａ -> a: its target is not in the vocabulary
WIDTH = 4


def fake_embeddings() -> numpy.ndarray:
    return numpy.arange(len(VOCAB) * WIDTH, dtype="float32").reshape(len(VOCAB), WIDTH) / 10


def write_fake_sdist(path: Path, embeddings: numpy.ndarray = None, extra: dict = None, skip: str = "") -> Path:
    """A tarball laid out as LAC-2.1.2.tar.gz with the three files lac.py reads (and a decoy)."""
    embeddings = fake_embeddings() if embeddings is None else embeddings
    files = {
        "lac_model/conf/word.dic": "".join(f"{i}\t{token}\n" for i, token in enumerate(VOCAB)).encode("utf8"),
        "lac_model/conf/q2b.dic": "".join(f"{a}\t{b}\n" for a, b in Q2B).encode("utf8"),
        "lac_model/model/word_emb": write_tensor(embeddings),
        "seg_model/model/word_emb": write_tensor(numpy.zeros((2, 2), dtype="float32")),
        **(extra or {}),
    }
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            if name == skip:
                continue
            info = tarfile.TarInfo("LAC-2.1.2/LAC/" + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def spec_of(path: Path) -> Sdist:
    data = path.read_bytes()
    return Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", hashlib.sha256(data).hexdigest(), len(data))


@pytest.fixture
def fake_lac(tmp_path, monkeypatch):
    """A fabricated sdist that open_lac accepts: LAC_SDIST's hash and size and the vocabulary size patched."""
    path = write_fake_sdist(tmp_path / "LAC-2.1.2.tar.gz")
    monkeypatch.setattr(lac_module, "LAC_SDIST", spec_of(path))
    monkeypatch.setattr(lac_module, "VOCAB_SIZE", len(VOCAB))
    monkeypatch.setattr(lac_module, "EMB_WIDTH", WIDTH)
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "cache"))
    return path


# --- the paddle tensor reader ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,shape", [("float32", (3, 5)), ("int64", (7,)), ("float64", (2, 1, 3)), ("int32", (0, 4))]
)
def test_tensor_round_trip(dtype, shape):
    array = (numpy.arange(int(numpy.prod(shape))) * 3 - 5).astype(dtype).reshape(shape)
    read = read_tensor(write_tensor(array), "x")
    assert read.dtype == numpy.dtype(dtype) and read.shape == shape
    numpy.testing.assert_array_equal(read, array)


def test_tensor_reader_reads_a_paddle_file_byte_for_byte():
    """The header of LAC's word_emb as paddle wrote it (first 32 bytes of the real file): dims [58224, 128]
    as varints, float32 (5), then data; and a LoD level with its offsets skipped, dims packed."""
    header = bytes.fromhex("0000000000000000000000000000000009000000080510f0c603108001")
    data = numpy.arange(58224 * 128, dtype="<f4").tobytes()
    array = read_tensor(header + data, "word_emb", shape=(58224, 128), dtype="float32")
    assert array[1, 0] == 128.0
    lod = (
        b"\x00\x00\x00\x00"
        + (1).to_bytes(8, "little")
        + (16).to_bytes(8, "little")
        + bytes(16)
        + b"\x00\x00\x00\x00"
        + (6).to_bytes(4, "little")
        + bytes.fromhex("0803120202")
        + b""
    )
    # field 1 = 3 (int64), field 2 packed [2, 2]... one byte short of the packed length: 2 dims need 2 bytes
    lod = lod[:-1] + bytes.fromhex("0203")[:1] + b"\x03"
    array = read_tensor(lod + numpy.arange(6, dtype="<i8").tobytes(), "packed")
    assert array.shape == (2, 3) and array[1, 2] == 5


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b[:-3], "truncated"),
        (lambda b: b[:10], "truncated"),
        (lambda b: b + b"\x00", "bytes after the data"),
        (lambda b: b"\x01" + b[1:], "version 1"),
        (lambda b: b[:20] + b"\x08\x63" + b[22:], "data type 99"),
    ],
)
def test_damaged_tensor_files_are_refused_naming_the_file(damage, message):
    good = write_tensor(numpy.ones((2, 3), dtype="float32"))
    with pytest.raises(ValueError, match=f"emb.bin: .*{message}"):
        read_tensor(damage(good), "emb.bin")


def test_unexpected_shape_or_dtype_is_refused():
    data = write_tensor(numpy.ones((2, 3), dtype="float32"))
    with pytest.raises(ValueError, match=r"w: shape \(2, 3\), expected \(3, 2\)"):
        read_tensor(data, "w", shape=(3, 2))
    with pytest.raises(ValueError, match="w: dtype float32, expected float64"):
        read_tensor(data, "w", dtype="float64")


# --- vocabularies ----------------------------------------------------------------------------------------------


def test_word_dic_keeps_a_space_token_and_checks_ids_and_oov():
    assert parse_word_dic("0\t \n1\t张\n2\tOOV\n".encode("utf8"), "d") == [" ", "张", "OOV"]
    with pytest.raises(ValueError, match=r"d, line 2: expected '1<TAB>token'"):
        parse_word_dic("0\t \n2\t张\n3\tOOV\n".encode("utf8"), "d")
    with pytest.raises(ValueError, match="the last entry is '张', expected 'OOV'"):
        parse_word_dic("0\t \n1\t张\n".encode("utf8"), "d")
    with pytest.raises(ValueError, match="3 entries, expected 4"):
        parse_word_dic("0\t \n1\t张\n2\tOOV\n".encode("utf8"), "d", size=4)
    with pytest.raises(ValueError, match="d: not UTF-8"):
        parse_word_dic(b"0\t\xff\n", "d")


def test_q2b_pairs_and_bad_lines():
    assert parse_q2b("萬\t万\r\n１\t1\n".encode("utf8"), "q") == {"萬": "万", "１": "1"}
    assert parse_q2b("萬\t万\n萬\t丂\n".encode("utf8"), "q") == {"萬": "丂"}  # the last wins, as in LAC's reader
    with pytest.raises(ValueError, match="q, line 2: expected 'from<TAB>to'"):
        parse_q2b("萬\t万\n１1\n".encode("utf8"), "q")


def test_char_bigram_keys_and_aliases_by_brute_force():
    embeddings = fake_embeddings()
    keys, ids, counts = char_bigram_vectors(VOCAB, embeddings, dict(Q2B), max_length=2)
    expected = {token: i for i, token in enumerate(VOCAB) if token not in (" ", "OOV") and len(token) <= 2}
    expected.update({"萬": VOCAB.index("万"), "與": VOCAB.index("与"), "１": VOCAB.index("1")})
    assert dict(zip(keys, ids.tolist())) == expected
    assert counts == {"characters": 9, "bigrams": 3, "longer": 0, "aliases": 3}
    keys, _, counts = char_bigram_vectors(VOCAB, embeddings, dict(Q2B), max_length=3)
    assert "北京市" in keys and counts["longer"] == 1


# --- the sdist: checks, reading, fetching ----------------------------------------------------------------------


def test_open_lac_reads_the_three_files_of_a_checked_sdist(fake_lac):
    lac = open_lac(fake_lac)
    vocabulary, embeddings = lac.word_embeddings()
    assert vocabulary == VOCAB
    numpy.testing.assert_array_equal(embeddings, fake_embeddings())
    assert lac.replacements() == dict(Q2B)


def test_a_tarball_with_another_hash_is_refused_naming_it(fake_lac, tmp_path):
    other = write_fake_sdist(tmp_path / "other.tar.gz", embeddings=fake_embeddings() + 1)
    with pytest.raises(ValueError, match=f"{other}: .*expected"):
        open_lac(other)


def test_a_member_of_unexpected_shape_or_missing_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(lac_module, "VOCAB_SIZE", len(VOCAB))
    monkeypatch.setattr(lac_module, "EMB_WIDTH", WIDTH)
    wrong = LacFiles(write_fake_sdist(tmp_path / "a.tar.gz", embeddings=numpy.ones((len(VOCAB), 3), "float32")))
    with pytest.raises(ValueError, match=r"a.tar.gz:lac_model/model/word_emb: shape \(15, 3\), expected \(15, 4\)"):
        wrong.word_embeddings()
    missing = LacFiles(write_fake_sdist(tmp_path / "b.tar.gz", skip="lac_model/conf/q2b.dic"))
    with pytest.raises(ValueError, match="b.tar.gz: LAC-2.1.2/LAC/lac_model/conf/q2b.dic missing"):
        missing.replacements()


def write_simple_index(folder: Path, sdist: Path) -> str:
    """A PEP 503 index in folder holding sdist under the project lac, as a file:// URL."""
    project = folder / "lac"
    project.mkdir(parents=True)
    target = project / sdist.name
    target.write_bytes(sdist.read_bytes())
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<a href="{sdist.name}#sha256={digest}">{sdist.name}</a>\n', encoding="utf8")
    return folder.resolve().as_uri()


def test_fetch_finds_the_sdist_on_pips_index_checks_and_caches_it(fake_lac, tmp_path, monkeypatch):
    """pip's own index machinery finds the file (here a local index named by PIP_INDEX_URL), the bytes are
    checked and kept in the cache; a second fetch reads the cache without looking the file up."""
    index = write_simple_index(tmp_path / "simple", fake_lac)
    monkeypatch.delenv(fetch.OFFLINE_ENV, raising=False)  # conftest forbids downloads; this test downloads
    monkeypatch.setenv("PIP_INDEX_URL", index)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", index)
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    spec = lac_module.LAC_SDIST
    assert fetch.find_url(spec).startswith("file:")
    cache = tmp_path / "cache"
    path = fetch_sdist(spec, cache=cache)
    assert path == cache / spec.filename and path.read_bytes() == fake_lac.read_bytes()
    monkeypatch.setattr(fetch, "find_url", lambda sdist: pytest.fail("looked up again"))
    assert fetch_sdist(spec, cache=cache) == path
    damaged = bytearray(path.read_bytes())
    damaged[100] ^= 0xFF
    path.write_bytes(bytes(damaged))  # a damaged cached copy
    with pytest.raises(ValueError, match=f"{path}: sha256 .* Delete it and fetch again"):
        fetch_sdist(spec, cache=cache)


def test_fetch_of_a_file_the_index_lacks_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(fetch.OFFLINE_ENV, raising=False)
    (tmp_path / "simple").mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").resolve().as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", (tmp_path / "simple").resolve().as_uri())
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    spec = Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", "0" * 64, 10)
    with pytest.raises(RuntimeError, match="not on the package indexes pip uses here.*--sdist PATH"):
        fetch_sdist(spec, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*"))  # nothing half-written left


def test_a_download_goes_to_a_partial_name_renamed_when_its_hash_matches(fake_lac, tmp_path, monkeypatch):
    """Issue 85: a killed fetch left a partial 65 MB file in the cache for good. The download is written to a
    name of its own (host, process), renamed once its sha256 matches; bytes that do not match leave nothing; a
    later fetch removes the partials of processes gone and other hosts' stale ones, not a live download's."""
    import os
    import subprocess
    import sys
    import time

    monkeypatch.delenv(fetch.OFFLINE_ENV, raising=False)
    spec = Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", fetch.sha256_of(fake_lac), fake_lac.stat().st_size)
    cache = tmp_path / "cache"
    seen = []

    def download(url, file, total, progress):
        seen.extend(path.name for path in cache.glob("*"))  # what the cache holds while it downloads
        file.write(url.encode("latin1"))

    monkeypatch.setattr(fetch, "find_url", lambda sdist: "x" * spec.size)  # right size, wrong bytes
    monkeypatch.setattr(fetch, "_download", download)
    with pytest.raises(ValueError, match="sha256 .* expected"):
        fetch_sdist(spec, cache=cache)
    assert len(seen) == 1 and seen[0].startswith(f"{spec.filename}.{fetch._host()}.{os.getpid()}.")
    assert seen[0].endswith(".part") and not list(cache.glob("*"))
    monkeypatch.setattr(fetch, "find_url", lambda sdist: fake_lac.read_bytes().decode("latin1"))
    path = fetch_sdist(spec, cache=cache)
    assert path == cache / spec.filename and path.read_bytes() == fake_lac.read_bytes()
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    partials = {
        "killed": f"{spec.filename}.{fetch._host()}.{gone.stdout.strip()}.abc.part",
        "live": f"{spec.filename}.{fetch._host()}.{os.getpid()}.abc.part",
        "elsewhere_now": f"{spec.filename}.otherhost.12.abc.part",
        "elsewhere_old": f"{spec.filename}.otherhost.13.abc.part",
        "older_name": f"{spec.filename}.k2j3h4.part",
    }
    for name in partials.values():
        (cache / name).write_bytes(b"partial")
    old = time.time() - fetch.PARTIAL_STALE_S - 60
    for key in ("elsewhere_old", "older_name"):
        os.utime(cache / partials[key], (old, old))
    assert fetch_sdist(spec, cache=cache) == path  # from the cache, its partials cleaned
    left = {key for key, name in partials.items() if (cache / name).exists()}
    assert left == {"live", "elsewhere_now"}


def test_offline_fetch_reads_the_cache_and_never_the_index(fake_lac, tmp_path, monkeypatch):
    """SPACY_CNER_OFFLINE=1 (set for the whole test suite in conftest): a cached or local copy is read, a missing
    one is an error that names the cache and the way out, and the index is never asked."""
    spec = Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", fetch.sha256_of(fake_lac), fake_lac.stat().st_size)
    monkeypatch.setenv(fetch.OFFLINE_ENV, "1")
    monkeypatch.setattr(fetch, "find_url", lambda sdist: pytest.fail("the index was asked"))
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match=f"not in the cache \\({cache / spec.filename}\\).*--paths.lac_sdist"):
        fetch_sdist(spec, cache=cache)
    assert fetch_sdist(spec, local=fake_lac, cache=cache) == fake_lac
    cache.mkdir()
    (cache / spec.filename).write_bytes(fake_lac.read_bytes())
    assert fetch_sdist(spec, cache=cache) == cache / spec.filename


# --- vectors ---------------------------------------------------------------------------------------------------

TEXTS = ["张三去了北京", "张三在上海工作", "李四去了北京", "王五在上海工作"] * 3


def test_combine_none_trained_and_concat(fake_lac):
    keys, rows, data = lac_table(open_lac(fake_lac))
    embeddings = fake_embeddings()
    for key, row in zip(keys, rows):
        numpy.testing.assert_array_equal(
            data[row], embeddings[VOCAB.index({"萬": "万", "與": "与", "１": "1"}.get(key, key))]
        )
    settings = VectorSettings(width=3, epochs=2, min_count=2, seed=0)
    same = combine(keys, rows, data, TEXTS, "none", settings)
    assert same[0] == keys and same[3] == {"lac_keys": len(keys), "added_keys": 0, "width": WIDTH}
    # trained: LAC's rows unchanged, the corpus's other characters and bigrams added in LAC's width.
    t_keys, t_rows, t_data, counts = combine(keys, rows, data, TEXTS, "trained", settings)
    assert t_data.shape[1] == WIDTH and t_keys[: len(keys)] == keys
    numpy.testing.assert_array_equal(t_data[t_rows[: len(keys)]], data[rows])
    corpus_keys = {c for t in TEXTS for c in t} | {a + b for t in TEXTS for a, b in zip(t, t[1:])}
    assert set(t_keys) == set(keys) | corpus_keys and counts["added_keys"] == len(corpus_keys - set(keys))
    # concat: [LAC's | own] with zeros where either lacks the key.
    c_keys, c_rows, c_data, counts = combine(keys, rows, data, TEXTS, "concat", settings)
    assert counts["width"] == WIDTH + 3 and set(c_keys) == set(keys) | corpus_keys
    row_of = dict(zip(c_keys, c_rows))
    numpy.testing.assert_array_equal(c_data[row_of["北京"], :WIDTH], embeddings[VOCAB.index("北京")])
    assert c_data[row_of["北京"], WIDTH:].any()  # in the corpus too
    assert not c_data[row_of["萬"], WIDTH:].any()  # LAC's only (an alias)
    assert not c_data[row_of["工作"], :WIDTH].any() and c_data[row_of["工作"], WIDTH:].any()  # the corpus's only
    with pytest.raises(ValueError, match="missing must be one of"):
        combine(keys, rows, data, TEXTS, "zeros", settings)


def write_corpus(path: Path, texts=TEXTS) -> Path:
    nlp = spacy.blank("zh")
    DocBin(docs=[Example.from_dict(nlp.make_doc(t), {"entities": []}).reference for t in texts]).to_disk(path)
    return path


def test_before_init_gives_the_vocab_lacs_vectors_and_credits_lac(fake_lac, tmp_path):
    train = write_corpus(tmp_path / "train.spacy")
    nlp = spacy.blank("zh")
    make_lac_vectors(str(train), missing="trained", sdist=str(fake_lac), width=3, epochs=2, min_count=2)(nlp)
    vectors = nlp.vocab.vectors
    numpy.testing.assert_array_equal(vectors[nlp.vocab.strings["北京"]], fake_embeddings()[VOCAB.index("北京")])
    numpy.testing.assert_array_equal(vectors[nlp.vocab.strings["萬"]], vectors[nlp.vocab.strings["万"]])
    assert vectors.find(key="工作") >= 0  # learnt on the corpus
    assert nlp.meta["sources"][-1]["license"] == "Apache-2.0" and "LAC" in nlp.meta["sources"][-1]["name"]
    words = spacy.blank("zh")
    make_lac_vectors(None, missing="none", sdist=str(fake_lac), max_length=3, dtype="float16")(words)
    assert words.vocab.vectors.data.dtype == numpy.float16 and words.vocab.vectors.find(key="北京市") >= 0
    assert vectors.find(key="北京市") < 0  # max_length 2: characters and bigrams only
    with pytest.raises(ValueError, match="dtype one of"):
        make_lac_vectors(None, missing="none", dtype="int4")
    with pytest.raises(ValueError, match="corpus \\(paths.train\\) is null"):
        make_lac_vectors(None, missing="trained")(spacy.blank("zh"))
    with pytest.raises(ValueError, match="missing must be one of"):
        make_lac_vectors(str(train), missing="zero")


def test_projected_width_keeps_the_vectors_on_their_principal_directions(fake_lac):
    full, projected = spacy.blank("zh"), spacy.blank("zh")
    make_lac_vectors(None, missing="none", sdist=str(fake_lac))(full)
    make_lac_vectors(None, missing="none", sdist=str(fake_lac), projected_width=2)(projected)
    data, small = full.vocab.vectors.data, projected.vocab.vectors.data
    assert small.shape == (data.shape[0], 2) and small.dtype == numpy.float32
    assert list(projected.vocab.vectors.keys()) == list(full.vocab.vectors.keys())
    # The reference: the top right singular vectors of the rows (uncentered), up to each column's sign.
    _, singular, vt = numpy.linalg.svd(data.astype("float64"), full_matrices=False)
    expected = data.astype("float64") @ vt[:2].T
    for column in range(2):
        assert numpy.allclose(small[:, column], expected[:, column], atol=1e-4) or numpy.allclose(
            small[:, column], -expected[:, column], atol=1e-4
        )
    # As much of the rows as two directions can keep: the energy of the top two singular values.
    assert numpy.isclose((small.astype("float64") ** 2).sum(), (singular[:2] ** 2).sum(), rtol=1e-4)
    with pytest.raises(ValueError, match="projected_width 500 is more than the vectors' width"):
        make_lac_vectors(None, missing="none", sdist=str(fake_lac), projected_width=500)(spacy.blank("zh"))
    with pytest.raises(ValueError, match="projected_width must be null or >= 1"):
        make_lac_vectors(None, missing="none", projected_width=0)


def test_int8_vectors_keep_each_column_to_within_half_a_step(fake_lac):
    """dtype "int8": each column divided by its largest magnitude, in steps of 1/127 (the readers multiply
    back by 1/127): every value within half a step of the float32 table's, each column's largest at +-127;
    refused with a component that reads the vectors through spaCy's StaticVectors, which would not scale them."""
    full, small = spacy.blank("zh"), spacy.blank("zh")
    make_lac_vectors(None, missing="none", sdist=str(fake_lac), projected_width=3)(full)
    make_lac_vectors(None, missing="none", sdist=str(fake_lac), projected_width=3, dtype="int8")(small)
    data, quantized = full.vocab.vectors.data, small.vocab.vectors.data
    assert quantized.dtype == numpy.int8 and quantized.shape == data.shape
    assert list(small.vocab.vectors.keys()) == list(full.vocab.vectors.keys())
    scale = numpy.abs(data).max(axis=0)
    assert (numpy.abs(quantized).max(axis=0) == 127).all()
    assert (numpy.abs(quantized / 127 - data / scale) <= 0.5 / 127 + 1e-6).all()
    tagger = spacy.blank("zh")
    tagger.add_pipe(
        "tok2vec",
        config={
            "model": {
                "@architectures": "spacy.Tok2Vec.v2",
                "embed": {
                    "@architectures": "spacy.MultiHashEmbed.v2",
                    "width": 8,
                    "attrs": ["ORTH"],
                    "rows": [100],
                    "include_static_vectors": True,
                },
                "encode": {
                    "@architectures": "spacy.MaxoutWindowEncoder.v2",
                    "width": 8,
                    "depth": 1,
                    "window_size": 1,
                    "maxout_pieces": 2,
                },
            }
        },
    )
    with pytest.raises(ValueError, match="model of 'tok2vec' reads them with spaCy's StaticVectors"):
        make_lac_vectors(None, missing="none", sdist=str(fake_lac), dtype="int8")(tagger)


def test_before_init_on_a_corpus_too_small_for_min_count_learns_with_1(fake_lac, tmp_path, capsys):
    """As the self-trained vectors: a toy or first-round corpus (no character twice) still trains, said."""
    train = write_corpus(tmp_path / "train.spacy", ["张三去了上海", "我在北京市工作"])
    nlp = spacy.blank("zh")
    make_lac_vectors(str(train), missing="trained", sdist=str(fake_lac), width=3, epochs=1, min_count=2)(nlp)
    assert "min_count 1" in capsys.readouterr().out and nlp.vocab.vectors.find(key="工作") >= 0


def test_before_init_leaves_initialize_vectors_to_spacy_and_fetches_nothing(tmp_path, monkeypatch, capsys):
    """--paths.vectors set: those vectors are the pipeline's (spaCy loads them after before_init); LAC is not
    fetched (open_lac fails here if called), nothing credited, and the log says which vectors."""
    monkeypatch.setattr(lac_vectors_module, "open_lac", lambda *args, **kwargs: pytest.fail("LAC was read"))
    nlp = spacy.blank("zh", config={"initialize": {"vectors": str(tmp_path / "other")}})
    assert make_lac_vectors(None, missing="trained")(nlp) is nlp
    assert not nlp.vocab.vectors.shape[0] and not nlp.meta.get("sources")
    assert f"{tmp_path / 'other'} ([initialize] vectors), not LAC's" in " ".join(capsys.readouterr().out.split())


def test_the_default_config_trains_with_lac_vectors_and_saves_them(fake_lac, tmp_path):
    """configs/default.cfg (--paths.lac_sdist: a local copy): trains, reads LAC's vectors and the corpus's own
    (missing = "trained"), saves them in float16 and credits LAC in meta.json."""
    from conftest import REPO_ROOT, train_from_config, write_corpus as write_toy_corpus

    overrides = {
        **write_toy_corpus(tmp_path),
        "paths.lac_sdist": str(fake_lac),
        "training.max_steps": 4,
        "training.eval_frequency": 2,
        "training.max_epochs": 0,
        "initialize.before_init.min_count": 1,
        "initialize.before_init.epochs": 1,
    }
    train_from_config(REPO_ROOT / "configs" / "default.cfg", tmp_path / "out", overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    vectors = nlp.vocab.vectors
    assert vectors.shape[1] == WIDTH and vectors.data.dtype == numpy.float16
    numpy.testing.assert_array_equal(
        vectors[nlp.vocab.strings["北京"]], fake_embeddings()[VOCAB.index("北京")].astype("float16")
    )
    assert vectors.find(key="工作") >= 0  # the toy corpus's own bigram, learnt
    assert any("LAC" in source["name"] for source in nlp.meta["sources"])
    assert nlp("张三去了北京").ents is not None


def test_cli_writes_vectors_and_refuses_a_used_folder(fake_lac, tmp_path):
    runner = CliRunner()
    out = tmp_path / "out" / "vectors"  # a folder whose parent does not exist yet
    result = runner.invoke(app, ["pretrained", "vectors", str(out), "--missing", "none", "--sdist", str(fake_lac)])
    assert result.exit_code == 0, result.output
    assert spacy.load(out).vocab.vectors.find(key="张三") >= 0
    result = runner.invoke(app, ["pretrained", "vectors", str(out), "--missing", "none", "--sdist", str(fake_lac)])
    assert result.exit_code == 1 and "is not an empty folder" in result.output
    result = runner.invoke(app, ["pretrained", "vectors", str(tmp_path / "v2"), "--sdist", str(fake_lac)])
    assert result.exit_code == 1 and "pass --train" in result.output
    bad = write_fake_sdist(tmp_path / "bad.tar.gz", embeddings=fake_embeddings() * 2)
    result = runner.invoke(app, ["pretrained", "fetch", "--sdist", str(bad)])
    assert result.exit_code == 1 and "bad.tar.gz" in result.output


REAL = REAL_LAC_SDIST  # the user's cache (the tests' own is empty: conftest)


@pytest.mark.slow
@pytest.mark.skipif(
    not REAL.exists(),
    reason=f"the real LAC sdist is not in the cache ({REAL}): `python -m spacy_cner pretrained fetch` puts it there",
)
def test_the_real_sdist():
    lac = open_lac(REAL)
    vocabulary, embeddings = lac.word_embeddings()
    assert vocabulary[0] == " " and vocabulary[-1] == "OOV" and embeddings.shape == (58224, 128)
    keys, rows, data = lac_table(lac)
    row_of = dict(zip(keys, rows))
    assert row_of["萬"] == row_of["万"] and "北京" in row_of and len(data) == 8222 + 28180
    assert numpy.isfinite(data).all()
