"""annotate's rows (records.py): an entity's score is ent._.score, whatever set it; alternatives on asking."""

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from spacy_cner.annotate.inputs import Row
from spacy_cner.annotate.records import doc_record, span_alternatives
from spacy_cner.pipeline import decoding  # noqa: F401  (ent._.score)


@Language.component("test_records_scored_ents")
def scored_ents(doc: Doc) -> Doc:
    """Entities with a probability and no span group, as the ready LAC pipeline sets them."""
    doc.ents = [doc.char_span(0, 2, label="PER")]
    doc.ents[0]._.score = 0.75
    return doc


def test_a_score_without_a_span_group_is_in_the_row():
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_records_scored_ents")
    doc = nlp("张三来了")
    row = doc_record(doc, Row({"text": doc.text}, text=doc.text), "entities", None)
    entity = {"start": 0, "end": 2, "label": "PER", "text": "张三", "score": 0.75}
    assert row == {"text": "张三来了", "entities": [entity]}
    assert span_alternatives(doc, None) == []
    assert (
        doc_record(doc, Row({"text": doc.text}, text=doc.text), "entities", None, alternatives=True)["alternatives"]
        == []
    )


def test_no_score_field_where_nothing_scores():
    nlp = spacy.blank("zh")
    doc = nlp("张三来了")
    doc.ents = [doc.char_span(0, 2, label="PER")]
    row = doc_record(doc, Row({"text": doc.text}, text=doc.text), "entities", None)
    assert row["entities"] == [{"start": 0, "end": 2, "label": "PER", "text": "张三"}]
