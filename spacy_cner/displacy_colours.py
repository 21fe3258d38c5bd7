"""displaCy colours for the labels of the bundled datasets and of LAC's pipeline, registered in spaCy's
displacy_colors on `import spacy_cner` (which loading a crf_ner or LAC pipeline does, through the factories'
entry points): every displaCy rendering then takes them, spacy.displacy.render and .serve, `evaluate
--displacy-path`'s entities.html, the robustness report. spaCy's own table has English OntoNotes labels only
(PERSON, GPE...): Resume's EDU or MSRA's NR were drawn in its grey. Not an entry point: displaCy loads all of
that registry's at every rendering, and this one would import spacy_cner (and torch) into every pipeline's.

A label that means one of spaCy's (MSRA's NR a person) takes spaCy's colour, where no other label of its
dataset does; the others get colours of their own, distinct within each dataset (a test checks), a nominal
mention (Weibo's .NOM) a lighter one of its named mention's.
"""

from typing import Dict

from spacy.displacy.render import DEFAULT_LABEL_COLORS
from spacy.util import registry

# Labels that mean one of spaCy's labels (upper case, as displaCy looks them up).
_SPACY_LABEL = {
    "PER": "PERSON",
    "NAME": "PERSON",
    "NR": "PERSON",
    "PER.NAM": "PERSON",
    "NS": "LOC",
    "LOC.NAM": "LOC",
    "ADDRESS": "LOC",
    "NT": "ORG",
    "ORG.NAM": "ORG",
    "ORGANIZATION": "ORG",
    "GPE.NAM": "GPE",
    "SCENE": "FAC",
    "BOOK": "WORK_OF_ART",
    "MOVIE": "EVENT",
    "GAME": "PRODUCT",
}
# The others: their own colour.
_OWN = {
    # Resume
    "CONT": "#fddbc7",
    "RACE": "#c7e9c0",
    "TITLE": "#fdae6b",
    "EDU": "#9ecae1",
    "PRO": "#fbb4d9",
    # E-commerce, Taobao, Youku
    "HC": "#fdd0a2",
    "HP": "#a1d99b",
    "HCCX": "#fdd0a2",
    "HPPX": "#a1d99b",
    "XH": "#bcbddc",
    "MISC": "#d9d9a0",
    "TELEVISION": "#f0d0ff",
    # Weibo's nominal mentions: lighter than the named ones'
    "PER.NOM": "#d4cdfd",
    "LOC.NOM": "#ffcab0",
    "ORG.NOM": "#bcf5f5",
    "GPE.NOM": "#fee4b9",
    # CLUENER
    "COMPANY": "#b3de69",
    "GOVERNMENT": "#80b1d3",
    "POSITION": "#fccde5",
}


@registry.displacy_colors("spacy-cner.label_colours.v1")
def label_colours() -> Dict[str, str]:
    """Label -> colour for displaCy (its entity renderer reads every function of this registry).

    RETURNS (Dict[str, str]): A colour for each label of the bundled datasets and of LAC's pipeline.
    """
    colours = {label: DEFAULT_LABEL_COLORS[spacy_label] for label, spacy_label in _SPACY_LABEL.items()}
    colours.update(_OWN)
    return colours
