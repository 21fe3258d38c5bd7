"""The model card (`python -m spacy_cner model-card`) and spacy.explain for crf_ner's labels."""

import importlib
from types import SimpleNamespace

import pytest
import spacy
import srsly
from spacy import glossary
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_cner.cli import app
from spacy_cner.cli.model_card import _probabilities, write_model_card
from spacy_cner.corpus.labels import DATASET_LABELS, dataset_of, explain_labels, label_descriptions

RESUME = DATASET_LABELS["Resume NER (Zhang and Yang 2018)"]
KNOWN = {label for meanings in DATASET_LABELS.values() for label in meanings}

CARD_DATA = [
    ("张三毕业于北京大学", [(0, 2, "NAME"), (5, 9, "EDU")]),
    ("李四爱吃火锅", [(0, 2, "NAME"), (4, 6, "FOOD")]),
    ("王五在清华大学读书", [(0, 2, "NAME"), (3, 7, "EDU")]),
]


@pytest.fixture
def fresh_glossary(monkeypatch):
    """spaCy's glossary as it is without spacy_cner's additions, restored after the test."""
    clean = {
        k: v for k, v in glossary.GLOSSARY.items() if k not in KNOWN or k in ("NR", "NT", "PER", "LOC", "ORG", "MISC")
    }
    clean.pop("FOOD", None)
    monkeypatch.setattr(glossary, "GLOSSARY", clean)
    return clean


def _trained(tmp_path, descriptions=None, ents_threshold=None):
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"ents_threshold": ents_threshold})
    examples = [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in CARD_DATA]
    settings = {"label_descriptions": descriptions} if descriptions else {}
    nlp.get_pipe("crf_ner").initialize(lambda: examples, nlp=nlp, **settings)
    nlp.meta["performance"] = {
        "ents_f": 0.5,
        "ents_per_type": {"NAME": {"p": 0.9, "r": 0.8, "f": 0.8471}, "EDU": {"p": 0.5, "r": 0.25, "f": 0.3333}},
    }
    path = tmp_path / "model"
    nlp.to_disk(path)
    return path


def test_label_descriptions_take_the_users_then_the_datasets_never_the_name_alone():
    """Resume's LOC is a place of origin and its EDU an education level, not spaCy's (OntoNotes') meanings:
    the meanings come from the dataset the whole label set belongs to; a label set of no known dataset gets
    the user's meanings only."""
    resume = ["NAME", "CONT", "RACE", "TITLE", "EDU", "PRO", "ORG", "LOC"]
    found = label_descriptions(resume)
    assert found["LOC"] == RESUME["LOC"] and "籍贯" in found["LOC"] and found["LOC"] != glossary.GLOSSARY["LOC"]
    assert "education level" in found["EDU"].lower() and found["ORG"] == RESUME["ORG"]
    assert dataset_of(resume) == dataset_of(resume[:-1]) == "Resume NER (Zhang and Yang 2018)"  # a label short
    assert label_descriptions(["PER", "LOC", "ORG"])["LOC"] == "Location or place name"  # People's Daily's
    assert label_descriptions(["TELEVISION", "PER", "MISC"])["MISC"].startswith("Other: season")  # Youku's MISC
    assert label_descriptions(["HCCX", "MISC"])["MISC"].startswith("Other, mostly a place of origin")  # Taobao's
    assert dataset_of(["PER"]) is None  # Youku's or People's Daily's: not said
    found = label_descriptions(["EDU", "PER", "FOOD", "UNKNOWN"], {"FOOD": "Dish or food"})
    assert found == {"FOOD": "Dish or food"}  # no dataset has these labels: no meaning by name
    assert label_descriptions(["LOC"], dataset="Resume NER (Zhang and Yang 2018)") == {"LOC": RESUME["LOC"]}
    with pytest.raises(ValueError, match="label_descriptions"):
        label_descriptions(["FOOD"], {"FOOD": ""})


def test_explain_keeps_spacys_own_terms(fresh_glossary):
    added = explain_labels({"NR": "Person name (MSRA)", "NS": "Location or place name (MSRA)"})
    assert added == {"NS": "Location or place name (MSRA)"}
    assert spacy.explain("NR") == "proper noun"  # the Chinese Treebank POS tag keeps its meaning
    assert spacy.explain("NS") == "Location or place name (MSRA)"


def test_a_loaded_pipeline_teaches_spacy_explain_its_labels(tmp_path, fresh_glossary):
    path = _trained(tmp_path, descriptions={"FOOD": "Dish or food"})
    glossary.GLOSSARY.pop("FOOD", None)
    glossary.GLOSSARY.pop("EDU", None)
    assert "FOOD" not in glossary.GLOSSARY
    nlp = spacy.load(path)
    assert spacy.explain("FOOD") == "Dish or food"
    # NAME, EDU and FOOD are no known dataset's labels: EDU's meaning is not guessed
    assert spacy.explain("EDU") is None
    assert nlp.get_pipe("crf_ner").label_descriptions["FOOD"] == "Dish or food"


def test_model_card_in_meta_and_the_package_readme(tmp_path, fresh_glossary):
    path = _trained(tmp_path)
    nlp = spacy.load(path)
    DocBin(docs=[nlp.make_doc(text) for text, _ in CARD_DATA]).to_disk(tmp_path / "dev.spacy")
    meta = write_model_card(
        path,
        source_name="Resume NER (Zhang and Yang 2018)",
        source_url="https://example.org/resume",
        source_license="research only",
        speed_corpus=tmp_path / "dev.spacy",
    )
    saved = srsly.read_json(path / "meta.json")
    assert saved["notes"] == meta["notes"]
    assert saved["sources"] == [
        {"name": "Resume NER (Zhang and Yang 2018)", "url": "https://example.org/resume", "license": "research only"}
    ]
    notes = saved["notes"]
    assert f"| `EDU` | {RESUME['EDU']} | 50.00 | 25.00 | 33.33 |" in notes  # the source names the dataset
    assert "| `FOOD` | n/a | n/a | n/a | n/a |" in notes  # no meaning given, no dev score
    assert "characters a second: 3 texts of dev.spacy" in notes
    assert "`doc.ents` are the most probable tag sequence (Viterbi)" in notes and "no temperature fitted" in notes
    package = importlib.import_module("spacy.cli.package")
    readme = package.generate_readme(saved)
    assert notes in readme and "Resume NER (Zhang and Yang 2018)" in readme
    # Written again: one source of that name, the same card.
    assert write_model_card(path, source_name="Resume NER (Zhang and Yang 2018)")["sources"][0]["name"].startswith(
        "Resume"
    )
    assert len(srsly.read_json(path / "meta.json")["sources"]) == 1


def test_model_card_command_takes_the_users_label_meanings(tmp_path, fresh_glossary):
    path = _trained(tmp_path)
    labels = tmp_path / "labels.json"
    srsly.write_json(labels, {"FOOD": "Dish or food"})
    result = CliRunner().invoke(app, ["model-card", str(path), "--labels", str(labels)])
    assert result.exit_code == 0, result.output
    assert "| `FOOD` | Dish or food |" in srsly.read_json(path / "meta.json")["notes"]
    # Kept in the pipeline: a later load explains it.
    glossary.GLOSSARY.pop("FOOD", None)
    spacy.load(path)
    assert spacy.explain("FOOD") == "Dish or food"
    srsly.write_json(labels, ["FOOD"])
    result = CliRunner().invoke(app, ["model-card", str(path), "--labels", str(labels)])
    assert result.exit_code == 1 and "expected a JSON object" in result.output


def test_model_card_refuses_a_folder_without_meta_or_crf_ner(tmp_path):
    with pytest.raises(ValueError, match="no meta.json"):
        write_model_card(tmp_path)
    nlp = spacy.blank("zh")
    nlp.to_disk(tmp_path / "blank")
    with pytest.raises(ValueError, match="no crf_ner component"):
        write_model_card(tmp_path / "blank")


def test_model_card_says_how_doc_ents_are_decoded_and_leaves_the_training_output(tmp_path):
    path = _trained(tmp_path, ents_threshold=0.7)
    before = (path / "meta.json").read_bytes()
    meta = write_model_card(path, output=tmp_path / "card")
    assert "the spans at least 0.700 probable (set in the config)" in meta["notes"]
    assert (path / "meta.json").read_bytes() == before  # the training output is left as it was
    assert srsly.read_json(tmp_path / "card" / "meta.json")["notes"] == meta["notes"]
    assert spacy.load(tmp_path / "card").get_pipe("crf_ner").labels == spacy.load(path).get_pipe("crf_ner").labels
    with pytest.raises(ValueError, match="lies inside the pipeline.s folder"):
        write_model_card(path, output=path / "card")


def test_model_card_output_never_deletes_what_it_did_not_write(tmp_path, monkeypatch):
    """--output names a new folder, an empty one or this command's earlier copy (replaced); the model's
    parent, '.', the model itself, a file or a folder of other files are refused, each in one line, and
    left as they were."""
    path = _trained(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    for output in (str(tmp_path), ".", str(path), str(path / "meta.json")):
        result = CliRunner().invoke(app, ["model-card", str(path), "--output", output])
        said = " ".join(result.output.split())  # one message, wrapped to the terminal's width
        assert result.exit_code == 1 and said.count("✘") == 1 and "Traceback" not in said, result.output
        assert "the pipeline's folder" in said or "is a file" in said
    others = tmp_path / "others"
    others.mkdir()
    (others / "notes.txt").write_text("mine", encoding="utf8")
    result = CliRunner().invoke(app, ["model-card", str(path), "--output", str(others)])
    assert result.exit_code == 1
    assert "holds files this command did not write (notes.txt)" in " ".join(result.output.split())
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == {**before, others / "notes.txt": b"mine"}
    card = tmp_path / "card"
    card.mkdir()  # empty: fine
    write_model_card(path, output=card)
    (card / "meta.json").write_text("{}", encoding="utf8")
    (card / "crf_ner" / "cfg").unlink()  # a copy cut short: written again
    meta = write_model_card(path, output=card)  # its own earlier copy: replaced
    assert srsly.read_json(card / "meta.json") == meta and (card / "crf_ner" / "cfg").exists()
    assert spacy.load(card).get_pipe("crf_ner").labels == spacy.load(path).get_pipe("crf_ner").labels
    (card / "extra.txt").write_text("mine", encoding="utf8")
    with pytest.raises(ValueError, match="did not write"):
        write_model_card(path, output=card)
    assert (card / "extra.txt").read_text(encoding="utf8") == "mine"


def test_model_card_says_how_doc_ents_are_decoded():
    def pipe(ents_threshold, fitted, chosen):
        cfg = {"temperature": 1.5, "fitted_threshold": fitted, "threshold_chosen": chosen}
        entity_threshold = fitted if ents_threshold == "fitted" or chosen else None
        return SimpleNamespace(ents_threshold=ents_threshold, cfg=cfg, entity_threshold=entity_threshold)

    assert "at least 0.420 probable (fitted on dev)" in _probabilities(pipe("fitted", 0.42, False))
    assert "at least 0.420 probable (fitted on dev, where it beat the best path)" in _probabilities(
        pipe("auto", 0.42, True)
    )
    best = _probabilities(pipe("auto", 0.42, False))
    assert "(Viterbi), which scored at least as well on dev as the threshold fitted there" in best
    assert "(Viterbi)." in _probabilities(pipe(None, None, False))
    assert "(Viterbi)." in _probabilities(pipe("auto", 0.42, None))  # calibrated before "auto": no choice made


def test_model_card_labels_and_meanings_cannot_break_its_table(tmp_path):
    """Issue 85: labels went into the Markdown table as they were: a `|` split the row into more cells, a
    backtick ended the code span, a newline in a meaning ended the row. Each row now has its five cells."""
    import re

    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"ents_threshold": None})
    data = [("张三毕业于北京大学", [(0, 2, "NA|ME"), (5, 9, "`EDU`")])]
    examples = [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in data]
    meanings = {"NA|ME": "A person's name | or alias\nsecond line", "`EDU`": "<b>School</b> & college"}
    nlp.get_pipe("crf_ner").initialize(lambda: examples, nlp=nlp)
    nlp.to_disk(tmp_path / "model")
    notes = write_model_card(tmp_path / "model", descriptions=meanings)["notes"]
    table = [line for line in notes.splitlines() if line.startswith("|")]
    assert len(table) == 4
    for row in table:
        assert len(re.split(r"(?<!\\)\|", row)) == 7, row  # five cells between the outer pipes
    assert "| `NA\\|ME` | A person's name \\| or alias second line |" in notes
    assert "| `` `EDU` `` | &lt;b&gt;School&lt;/b&gt; &amp; college |" in notes


def test_model_card_keeps_the_meanings_given_at_initialize(tmp_path):
    """The meanings given to initialize (label_descriptions) came out "n/a" in the card: loading the pipeline
    taught spaCy's glossary them, and the card then took them for the glossary's own and left them out."""
    path = _trained(tmp_path, descriptions={"FOOD": "Dish or food", "EDU": "School"})
    notes = write_model_card(path)["notes"]
    assert "| `FOOD` | Dish or food |" in notes and "| `EDU` | School |" in notes
