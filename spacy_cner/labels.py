"""What entity labels mean: the descriptions a `crf_ner` pipe keeps for its labels (from the user, or
those of the datasets this package benchmarks on), given to `spacy.explain` and to the model card."""
from typing import Dict, Iterable, Mapping, Optional

from spacy import glossary

# The labels of the corpora in ../shared/data and the CLUENER/Weibo sets, as their papers define them.
KNOWN_LABELS: Dict[str, str] = {
    # Resume NER (Zhang and Yang 2018)
    "NAME": "Person name",
    "CONT": "Country or region of nationality",
    "RACE": "Ethnicity",
    "TITLE": "Job title or position",
    "EDU": "Educational institution or degree",
    "PRO": "Profession or field of study",
    # MSRA (SIGHAN 2006): NR and NT are also Chinese Treebank POS tags in spaCy's glossary
    "NR": "Person name (MSRA)",
    "NS": "Location or place name (MSRA)",
    "NT": "Organisation name (MSRA)",
    # E-commerce (Ding et al. 2019), Taobao and Youku (Jie et al. 2019)
    "HC": "Product (e-commerce)",
    "HP": "Brand (e-commerce)",
    "HCCX": "Product type (Taobao)",
    "HPPX": "Brand (Taobao)",
    "XH": "Model number (Taobao)",
    "TELEVISION": "Show, film or animation title (Youku)",
    # Weibo NER (Peng and Dredze 2015): named and nominal mentions
    "PER.NAM": "Person, named",
    "PER.NOM": "Person, nominal mention",
    "LOC.NAM": "Location, named",
    "LOC.NOM": "Location, nominal mention",
    "ORG.NAM": "Organisation, named",
    "ORG.NOM": "Organisation, nominal mention",
    "GPE.NAM": "Geo-political entity, named",
    "GPE.NOM": "Geo-political entity, nominal mention",
    # CLUENER 2020 (Xu et al. 2020)
    "address": "Address",
    "book": "Book title",
    "company": "Company",
    "game": "Game title",
    "government": "Government body",
    "movie": "Film title",
    "name": "Person name",
    "organization": "Organisation",
    "position": "Job title or position",
    "scene": "Scenic spot",
}


def label_descriptions(labels: Iterable[str], given: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The description of each label that has one: given first, then KNOWN_LABELS, then spaCy's
    glossary (PER, LOC, ORG, MISC ...); labels without any are left out.

    labels (Iterable[str]): The pipe's labels.
    given (Optional[Mapping[str, str]]): The user's descriptions, e.g. from
        [initialize.components.crf_ner.label_descriptions].
    RETURNS (Dict[str, str]): label -> description.
    """
    given = dict(given or {})
    for label, description in given.items():
        if not isinstance(label, str) or not isinstance(description, str) or not description.strip():
            raise ValueError(
                f"label_descriptions: expected label -> non-empty description strings, got {label!r}: {description!r}."
            )
    found = {}
    for label in labels:
        description = given.get(label) or KNOWN_LABELS.get(label) or glossary.GLOSSARY.get(label)
        if description:
            found[label] = description
    return found


def explain_labels(descriptions: Mapping[str, str]) -> Dict[str, str]:
    """Make `spacy.explain` know these labels: each one spaCy's glossary does not hold is added (a
    term it holds, such as the POS tags NR and NT, keeps spaCy's meaning).

    RETURNS (Dict[str, str]): The entries added.
    """
    added = {label: text for label, text in descriptions.items() if label not in glossary.GLOSSARY}
    glossary.GLOSSARY.update(added)
    return added
