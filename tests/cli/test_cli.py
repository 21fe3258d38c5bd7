"""`python -m spacy_cner fetch-assets` and `show-ents`: the commands project.yml calls."""

import hashlib

import srsly
from typer.testing import CliRunner

from conftest import REPO_ROOT, trained_pipeline
from spacy_cner.cli import app

runner = CliRunner()


def write_project(tmp_path, url, checksum):
    asset = {"dest": "assets/toy/train.txt", "url": url, "checksum": checksum}
    srsly.write_yaml(tmp_path / "project.yml", {"title": "toy", "assets": [asset]})
    return tmp_path / "project.yml"


def test_fetch_assets_copies_from_local_folder_and_verifies(tmp_path):
    local = tmp_path / "local"
    (local / "toy").mkdir(parents=True)
    (local / "toy" / "train.txt").write_bytes("北 B-LOC\n".encode("utf8"))
    checksum = hashlib.md5((local / "toy" / "train.txt").read_bytes()).hexdigest()
    project = write_project(tmp_path, "https://example.invalid/train.txt", checksum)
    result = runner.invoke(app, ["fetch-assets", str(project), "--local", str(local)])
    assert result.exit_code == 0, result.output
    assert "copied from" in result.output
    assert (tmp_path / "assets" / "toy" / "train.txt").read_bytes() == "北 B-LOC\n".encode("utf8")
    again = runner.invoke(app, ["fetch-assets", str(project), "--local", str(local)])
    assert "already present" in again.output


def test_fetch_assets_downloads_when_not_local_and_rejects_bad_checksum(tmp_path):
    source = tmp_path / "remote.txt"
    source.write_text("京 I-LOC\n", encoding="utf8")
    project = write_project(tmp_path, source.as_uri(), "0" * 32)
    result = runner.invoke(app, ["fetch-assets", str(project), "--local", str(tmp_path / "nowhere")])
    assert result.exit_code == 1
    assert "does not match the expected" in result.output
    assert not (tmp_path / "assets" / "toy" / "train.txt").exists()
    good = hashlib.md5(source.read_bytes()).hexdigest()
    project = write_project(tmp_path, source.as_uri(), good)
    result = runner.invoke(app, ["fetch-assets", str(project)])
    assert result.exit_code == 0, result.output
    assert "downloaded from" in result.output


def test_fetch_assets_names_url_and_local_path_when_both_fail(tmp_path):
    project = write_project(tmp_path, (tmp_path / "missing.txt").as_uri(), None)
    result = runner.invoke(app, ["fetch-assets", str(project), "--local", str(tmp_path / "nowhere")])
    assert result.exit_code == 1
    assert "missing.txt" in result.output and "nowhere" in result.output


def test_fetch_assets_takes_a_dataset_of_ones_own_in_place(tmp_path):
    """A dataset project.yml does not list: its files put under assets/<name> by hand are used."""
    project = write_project(tmp_path, "https://example.invalid/train.txt", None)
    result = runner.invoke(app, ["fetch-assets", str(project), "--dest", "assets/weibo"])
    assert result.exit_code == 1
    output = " ".join(result.output.split())  # the printer wraps long lines
    assert "holds no files" in output and "--vars.train_file" in output
    (tmp_path / "assets" / "weibo").mkdir(parents=True)
    (tmp_path / "assets" / "weibo" / "weiboNER_2nd_conll.train").write_text("科0\tO\n", encoding="utf8")
    result = runner.invoke(app, ["fetch-assets", str(project), "--dest", "assets/weibo"])
    assert result.exit_code == 0, result.output
    assert "using the files there (weiboNER_2nd_conll.train)" in " ".join(result.output.split())


def test_show_ents_prints_entities(tmp_path):
    trained_pipeline(tmp_path / "model")
    result = runner.invoke(app, ["show-ents", str(tmp_path / "model"), "我在北京"])
    assert result.exit_code == 0, result.output
    assert "北京" in result.output and "LOC" in result.output


def test_display_table_aligns_cjk_by_display_width():
    from spacy_cner.cli import display_table, display_width

    assert display_width("北京a\u0301") == 5  # 2 + 2 + 1 + a combining accent
    table = display_table(
        [("北京市", "LOC", "2", "5"), ("ab", "PER", "10", "12")], ("entity", "label", "start", "end"), "llrr"
    )
    lines = table.splitlines()
    label_columns = {display_width(line[: line.index(label)]) for line, label in zip(lines[2:], ("LOC", "PER"))}
    assert len(label_columns) == 1 and display_width(lines[0][: lines[0].index("label")]) in label_columns
    assert len({display_width(line) for line in lines}) == 1  # right-aligned last column: equal widths


def test_evaluate_writes_the_entities_page_for_crf_ner(tmp_path):
    from spacy.tokens import DocBin

    examples = trained_pipeline(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples]).to_disk(tmp_path / "dev.spacy")
    # The folder need not exist (spaCy's own option requires it).
    args = [str(tmp_path / "model"), str(tmp_path / "dev.spacy"), "--displacy-path", str(tmp_path / "pages" / "dev")]
    result = runner.invoke(app, ["evaluate", *args])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "pages" / "dev" / "entities.html").read_text(encoding="utf8")
    assert "北京" in page and "LOC" in page
    result = runner.invoke(app, ["evaluate", *args[:2], f"--displacy-path={tmp_path / 'other'}"])
    assert result.exit_code == 0 and (tmp_path / "other" / "entities.html").exists()
    # spaCy's own command skips crf_ner: the reason for ours.
    from spacy.cli.evaluate import evaluate

    (tmp_path / "spacy_pages").mkdir()
    evaluate(str(tmp_path / "model"), tmp_path / "dev.spacy", displacy_path=tmp_path / "spacy_pages", silent=True)
    assert not (tmp_path / "spacy_pages" / "entities.html").exists()


def test_debug_data_runs_the_named_entity_checks(tmp_path, fake_lac_sdist):
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    nlp = spacy.blank("zh")
    data = [("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("我在北京市工作", [(2, 5, "LOC")])]
    docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in data]
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    config = REPO_ROOT / "configs" / "default.cfg"
    paths = [
        "--paths.train",
        str(tmp_path / "train.spacy"),
        "--paths.dev",
        str(tmp_path / "train.spacy"),
        "--paths.lac_sdist",
        str(fake_lac_sdist),
    ]  # the default's vectors: LAC's, here a fabricated sdist
    result = runner.invoke(app, ["debug-data", str(config), *paths])
    assert "Named Entity Recognition" in result.output, result.output
    assert "2 label(s)" in result.output
