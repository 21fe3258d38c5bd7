"""A `spacy package` build of a trained pipeline installs and loads without importing spacy_cner."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.training import Example
from thinc.api import fix_random_seed

ENCODER = {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 16, "dropout": 0.0}
CPU_TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "char_rows": 200,
    "bigram_rows": 200,
    "bigram_dropout": 0.0,
}
# Not the toy corpus: two short sentences that LEXICON covers, so that each of the five builds trains quickly.
TRAIN = [("李四在上海工作", [(0, 2, "PER"), (3, 5, "LOC")]), ("王五去北京", [(0, 2, "PER"), (3, 5, "LOC")])]


ADAPTER = {"@layers": "spacy-cner.LexiconAdapter.v1", "word_width": 8, "word_rows": 64}
LEXICON = ["李四", "上海", "北京", "工作"]


@pytest.fixture(params=["cpu", "bert", "nezha", "cpu_lexicon", "bert_lexicon"])
def tok2vec(request):
    """The CPU embeddings, or a tiny local transformer (the package must carry its weights),
    optionally with a lexicon adapter (the package must carry its lexicon)."""
    kind = request.param.split("_")[0]
    if kind == "cpu":
        tok2vec = dict(CPU_TOK2VEC)
    else:
        path = request.getfixturevalue(f"tiny_{kind}")
        tok2vec = {"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(path)}
    if request.param.endswith("_lexicon"):
        tok2vec["lexicon_adapter"] = ADAPTER
    return tok2vec


def test_spacy_package_build_installs_and_loads(tmp_path, tok2vec):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": ENCODER}
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in TRAIN]
    lexicon_file = None
    if "lexicon_adapter" in tok2vec:
        lexicon_file = tmp_path / "words.txt"
        lexicon_file.write_text("\n".join(LEXICON) + "\n", encoding="utf8")
        nlp.config["initialize"]["components"] = {
            "crf_ner": {"lexicon": {"@misc": "spacy-cner.lexicon.v1", "source": str(lexicon_file)}}
        }
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    # The CPU build ships predicting in bfloat16 (precision, kept in the pipe's cfg); the others in float32.
    precision = "bfloat16" if "name" not in tok2vec and "lexicon_adapter" not in tok2vec else "float32"
    nlp.get_pipe("crf_ner").precision = precision
    expected = [(ent.text, ent.label_) for ent in nlp("李四在上海工作").ents]
    if lexicon_file is not None:
        # Loading needs neither the lexicon file nor its loader.
        lexicon_file.unlink()
        adapter = nlp.get_pipe("crf_ner").model.get_ref("tok2vec").get_ref("lexicon_adapter")
        assert adapter.attrs["lexicon"].lexicon.words == LEXICON
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "packages").mkdir()
    spacy_cli = [sys.executable, "-m", "spacy", "package", str(tmp_path / "model"), str(tmp_path / "packages")]
    subprocess.run(spacy_cli + ["--name", "cner_tiny", "--version", "0.0.1", "--force"], check=True)
    package_dir = tmp_path / "packages" / "zh_cner_tiny-0.0.1"
    meta = spacy.util.load_meta(package_dir / "meta.json")
    assert any(req.startswith("spacy-cner") for req in meta["requirements"])
    sdist = package_dir / "dist" / "zh_cner_tiny-0.0.1.tar.gz"
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(pip + ["--target", str(target), str(sdist)], check=True)
    # A fresh interpreter that never imports spacy_cner: the entry points must do it.
    code = (
        "import sys, spacy\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "nlp = spacy.load('zh_cner_tiny')\n"
        "doc = nlp('李四在上海工作')\n"
        "assert 'spacy_cner' in sys.modules\n"
        "print(nlp.get_pipe('crf_ner').precision)\n"
        "print([(ent.text, ent.label_) for ent in doc.ents])\n"
    )
    # The transformer's own files are moved away: the package must carry everything.
    source = Path(tok2vec["name"]) if "name" in tok2vec else None
    if source is not None:
        source.rename(source.with_name(source.name + "-moved"))
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    finally:
        if source is not None:
            source.with_name(source.name + "-moved").rename(source)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n", 1)[0] == precision
    assert result.stdout.split("\n", 1)[1].strip() == str(expected)


def test_version_and_type_marker():
    """spacy_cner.__version__ is the installed distribution's version (setup.cfg reads it from the
    package), and the package carries its PEP 561 marker."""
    import importlib.metadata

    import spacy_cner

    assert spacy_cner.__version__ == importlib.metadata.version("spacy-cner")
    assert (Path(spacy_cner.__file__).parent / "py.typed").is_file()


def test_package_command_builds_without_the_build_log(tmp_path):
    """`python -m spacy_cner package` makes spaCy's package folder and builds it, printing a few lines
    (spaCy's `package` passes setuptools' ~70 lines of file copying through)."""
    import tarfile

    spacy.blank("zh").to_disk(tmp_path / "model")
    (tmp_path / "packages").mkdir()
    command = [
        sys.executable,
        "-m",
        "spacy_cner",
        "package",
        "model",
        "packages",
        "--name",
        "tiny",
        "--version",
        "0.0.1",
        "--build",
        "sdist,wheel",
        "--no-isolation",
    ]  # offline: this environment's setuptools
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    printed = (result.stdout + result.stderr).strip().splitlines()
    assert len(printed) <= 12 and not any("copying" in line or "running" in line for line in printed), printed
    dist = tmp_path / "packages" / "zh_tiny-0.0.1" / "dist"
    assert sorted(path.name for path in dist.iterdir()) == ["zh_tiny-0.0.1-py3-none-any.whl", "zh_tiny-0.0.1.tar.gz"]
    assert any(line.endswith("zh_tiny-0.0.1.tar.gz") for line in printed)
    with tarfile.open(dist / "zh_tiny-0.0.1.tar.gz") as sdist:
        assert "zh_tiny-0.0.1/zh_tiny/zh_tiny-0.0.1/config.cfg" in sdist.getnames()


def test_a_failing_build_prints_its_log(tmp_path, capsys):
    from spacy_cner.cli.spacy_tools import build_quietly

    (tmp_path / "setup.py").write_text("print('the log of setup.py')\nraise SystemExit(3)\n", encoding="utf8")
    with pytest.raises(SystemExit):
        build_quietly(tmp_path, ["--sdist"], isolation=False)
    printed = capsys.readouterr()
    assert "the log of setup.py" in printed.err
    said = " ".join(printed.out.split())  # wasabi wraps long lines
    assert "`python -m build --sdist --no-isolation .` failed in" in said and "its log is above" in said


@pytest.mark.parametrize("command", ["spacy", "spacy_cner"])
def test_package_without_spacy_transformers(tmp_path, command):
    """On the README's install (no extras: neither spacy-transformers nor transformers), `python -m spacy package`
    and docs/packaging.md's `python -m spacy_cner package` make the package of a crf_ner pipeline: spaCy looks up
    `zh.spacy-cner.CRFTagger.v1`, misses, and catalogue loads every entry point of the registry, the transformer
    layer's among them, which must load without spacy-transformers (`--build none`: the build is tested above)."""
    from no_transformers import env_without_transformers

    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": CPU_TOK2VEC, "encoder": ENCODER}
    nlp.add_pipe("crf_ner", config={"model": model})
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in TRAIN])
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "packages").mkdir()
    args = ["package", "model", "packages", "--name", "tiny", "--version", "0.0.1", "--build", "none", "--force"]
    env = env_without_transformers(tmp_path / "site")
    result = subprocess.run(
        [sys.executable, "-m", command, *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    meta = spacy.util.load_meta(tmp_path / "packages" / "zh_tiny-0.0.1" / "meta.json")
    assert any(req.startswith("spacy-cner") for req in meta["requirements"]), meta["requirements"]
    assert not any("transformers" in req for req in meta["requirements"]), meta["requirements"]
