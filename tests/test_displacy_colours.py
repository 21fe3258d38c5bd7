"""Issue 81: displaCy drew every label of the Chinese datasets but PER/LOC/ORG in its grey: a colour for each
label of the bundled datasets and of LAC's pipeline, in spacy.displacy, `evaluate --displacy-path` and the
robustness report."""

import subprocess
import sys

import pytest
import spacy
from spacy.displacy.render import EntityRenderer
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_cner.corpus.labels import DATASET_LABELS
from spacy_cner.displacy_colours import label_colours

LAC_LABELS = ["PER", "LOC", "ORG", "TIME"]
GREY = EntityRenderer().default_color


@pytest.mark.parametrize("labels", [*DATASET_LABELS.values(), LAC_LABELS], ids=[*DATASET_LABELS, "LAC"])
def test_every_label_of_a_dataset_has_a_colour_of_its_own(labels):
    colours = EntityRenderer().colors
    assert all(colours.get(label.upper(), GREY) != GREY for label in labels), labels
    assert len({colours[label.upper()] for label in labels}) == len(labels), labels


def test_a_loaded_pipeline_renders_with_them_without_importing_spacy_cner(tmp_path):
    """The snippet in the README: spacy.load, then displacy.render; the factory's entry point imports
    spacy_cner, which registers the colours."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner")
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc("本科"), {"entities": [(0, 2, "EDU")]})])
    nlp.to_disk(tmp_path / "model")
    code = (
        "import sys, spacy\n"
        f"nlp = spacy.load({str(tmp_path / 'model')!r})\n"
        "doc = nlp.make_doc('本科学历')\n"
        "doc.ents = [doc.char_span(0, 2, label='EDU')]\n"
        "print(spacy.displacy.render(doc, style='ent', jupyter=False))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"background: {label_colours()['EDU']}" in result.stdout


def test_evaluate_and_the_robustness_report_use_them(tmp_path):
    from spacy_cner.cli import app
    from spacy_cner.robustness.report import CHANGED_COLOUR, _render

    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 16, "char_rows": 100},
        "encoder": None,
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc("本科学历"), {"entities": [(0, 2, "EDU")]})]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples]).to_disk(tmp_path / "dev.spacy")
    args = ["evaluate", str(tmp_path / "model"), str(tmp_path / "dev.spacy"), "--displacy-path", str(tmp_path / "p")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    page = (tmp_path / "p" / "entities.html").read_text(encoding="utf8")
    assert "EDU" in page and f"background: {label_colours()['EDU']}" in page
    # The report: an unchanged entity in its label's colour (it was grey), a changed one marked in red.
    html = _render("本科学历北京", [(0, 2, "EDU"), (4, 6, "LOC")], {(4, 6)}, 4)
    assert f"background: {label_colours()['EDU']}" in html and f"background: {CHANGED_COLOUR}" in html
