"""`python -m spacy_cner robustness`: metrics.json and an HTML report that renders in a browser."""

import shutil
import subprocess

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_cner.cli import app

from conftest import CONTEXT_GOLD as GOLD, CONTEXT_TEXTS as TEXTS


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("robustness")
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_context_sensitive_ner")
    nlp.to_disk(path / "model")
    docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in zip(TEXTS, GOLD)]
    DocBin(docs=docs).to_disk(path / "test.spacy")
    args = ["robustness", str(path / "model"), str(path / "test.spacy"), str(path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return path / "out"


def test_metrics_json(report):
    metrics = srsly.read_json(report / "metrics.json")
    # Pairs (0, 1): 深圳特区 stays GPE (at the start); (1, 2): it turns ORG after 张三来了.
    changed = [(c["sentence"], c["text"], c["before"], c["after"]) for c in metrics["changed"]]
    assert changed == [(2, "深圳特区", "GPE", "ORG")]
    assert metrics["robust"]["f"] == pytest.approx(0.75)  # 3 of the 4 entities kept
    assert metrics["attack_success_rate"] == pytest.approx(4 / (10 + 8))
    assert metrics["pairing"] == "adjacent"


def test_report_renders_the_changed_entities_in_chromium(report):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium package)")
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (report / "report.html").as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Sentences 1 + 2: 深圳特区: GPE → ORG" in dom
    assert "ORG ✱" in dom  # the changed entity, highlighted in the "in context" rendering
    assert "<svg" in dom and "R-F1" in dom
    # Gold next to alone and in context, the joint marked, the metrics defined.
    example = dom[dom.index('id="sample-1"') :]
    assert example.index(">Gold<") < example.index(">Alone<") < example.index(">In context<")
    assert "来了⏐" in example.replace("\n", "")  # 张三来了 | 深圳特区, the second an entity
    assert "<dt>Asr</dt>" in dom and "<dt>S-F1</dt>" in dom


def test_cjk_glyphs_render_in_chromium(tmp_path):
    """Without a CJK font every character is an empty box and the report test above still passes:
    two different characters drawn on a canvas must give different pixels."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium and fonts-noto-cjk)")
    page = tmp_path / "glyphs.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><div id='out'></div><script>"
        "function pixels(ch){const c=document.createElement('canvas');c.width=c.height=64;"
        "const x=c.getContext('2d');x.font='48px sans-serif';x.fillText(ch,4,52);"
        "return Array.from(x.getImageData(0,0,64,64).data).join(',');}"
        "document.getElementById('out').textContent=(pixels('深')===pixels('圳'))?'TOFU':'GLYPHS';"
        "</script></body></html>",
        encoding="utf8",
    )
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    assert '<div id="out">GLYPHS</div>' in dom, (
        "CJK characters render as empty boxes: install a CJK font (Debian: fonts-noto-cjk)"
    )


def test_too_few_sentences(tmp_path):
    nlp = spacy.blank("zh")
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[nlp.make_doc("张三")]).to_disk(tmp_path / "one.spacy")
    result = CliRunner().invoke(
        app, ["robustness", str(tmp_path / "model"), str(tmp_path / "one.spacy"), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    assert "needs at least 2" in result.output


def test_test_docs_without_entity_annotation_are_refused(tmp_path):
    """A CLUENER test file has no labels: its docs' entities are missing, not O, and scoring them
    as entity-free would print S-F1 0.00 as a result."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_context_sensitive_ner")
    nlp.to_disk(tmp_path / "model")
    annotated = Example.from_dict(nlp.make_doc(TEXTS[0]), {"entities": GOLD[0]}).reference
    docs = [annotated, nlp.make_doc(TEXTS[1]), nlp.make_doc(TEXTS[2])]
    DocBin(docs=docs).to_disk(tmp_path / "test.spacy")
    args = ["robustness", str(tmp_path / "model"), str(tmp_path / "test.spacy"), "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "2 of the 3 test docs have no entity annotation" in output and "docs 1, 2." in output
    assert not (tmp_path / "out").exists()


def test_gpu_id_without_cupy_fails_in_one_line(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed: --gpu-id 0 may work here")
    except ImportError:
        pass
    nlp = spacy.blank("zh")
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[nlp.make_doc("张三"), nlp.make_doc("李四")]).to_disk(tmp_path / "two.spacy")
    args = [
        "robustness",
        str(tmp_path / "model"),
        str(tmp_path / "two.spacy"),
        "-o",
        str(tmp_path / "out"),
        "--gpu-id",
        "0",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "CuPy is not installed" in result.output and "spacy-cner[cuda]" in result.output
    assert not isinstance(result.exception, ValueError)  # a message, not a traceback
