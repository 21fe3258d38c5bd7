"""What entity labels mean: the descriptions a `crf_ner` pipe keeps for its labels (from the user, or
those of the dataset its labels come from), given to `spacy.explain` and to the model card."""

from typing import Dict, Iterable, Mapping, Optional

from spacy import glossary

# What the labels of the corpora in ../shared/data and of the Weibo and CLUENER sets mean, by dataset: one
# label name means different things in different corpora (Resume's LOC is a place of origin, 云南建水人;
# its EDU an education level, 本科学历, while institutions are ORG), so a meaning is never read from a
# label's name alone. The names are those project.yml's source_name and the model card use.
DATASET_LABELS: Dict[str, Dict[str, str]] = {
    "Resume NER (Zhang and Yang 2018)": {
        "NAME": "Person name",
        "CONT": "Country or region of nationality",
        "RACE": "Ethnicity (汉族)",
        "TITLE": "Job title or position",
        "EDU": "Education level or degree (本科学历, 硕士); the institutions are ORG",
        "PRO": "Profession or field of study",
        "ORG": "Organisation: company, university or school, government body",
        "LOC": "Place of origin (籍贯, as in 云南建水人)",
    },
    "MSRA (SIGHAN 2006)": {
        "NR": "Person name (MSRA)",
        "NS": "Location or place name (MSRA)",
        "NT": "Organisation name (MSRA)",
    },
    "People's Daily NER (MSRA sentences, BIO)": {
        "PER": "Person name",
        "LOC": "Location or place name",
        "ORG": "Organisation name",
    },
    "E-commerce NER (Ding et al. 2019)": {
        "HC": "Product (产品, e.g. 套装, 外套)",
        "HP": "Brand (品牌, e.g. 华为, nike)",
    },
    "Youku NER (Jie et al. 2019)": {
        "TELEVISION": "Show, film or animation title (影视)",
        "PER": "Person (人物)",
        "MISC": "Other: season or part markers and numbers, countries (第二季, 韩国)",
    },
    "Taobao NER (Jie et al. 2019)": {
        "HCCX": "Product (e.g. 套装, 手机)",
        "HPPX": "Brand (e.g. 华为, nike)",
        "XH": "Model number (型号, e.g. i5, 7plus)",
        "MISC": "Other, mostly a place of origin (日本, 上海)",
    },
    "Weibo NER (Peng and Dredze 2015)": {
        "PER.NAM": "Person, named",
        "PER.NOM": "Person, nominal mention",
        "LOC.NAM": "Location, named",
        "LOC.NOM": "Location, nominal mention",
        "ORG.NAM": "Organisation, named",
        "ORG.NOM": "Organisation, nominal mention",
        "GPE.NAM": "Geo-political entity, named",
        "GPE.NOM": "Geo-political entity, nominal mention",
    },
    "CLUENER 2020 (Xu et al. 2020)": {
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
    },
}


def dataset_of(labels: Iterable[str]) -> Optional[str]:
    """The known dataset a label set comes from: the one whose labels are exactly these, else the one
    dataset whose labels hold them all (a corpus missing a rare label); None when none or several do."""
    wanted = set(labels)
    if not wanted:
        return None
    exact = [name for name, meanings in DATASET_LABELS.items() if set(meanings) == wanted]
    if exact:
        return exact[0]
    holding = [name for name, meanings in DATASET_LABELS.items() if wanted <= set(meanings)]
    return holding[0] if len(holding) == 1 else None


def label_descriptions(
    labels: Iterable[str], given: Optional[Mapping[str, str]] = None, dataset: Optional[str] = None
) -> Dict[str, str]:
    """The description of each label that has one: given first, then the meanings of the dataset the
    labels come from (named, or recognised by dataset_of from the whole label set); labels without
    any are left out. A label's name alone gives no meaning (spaCy's glossary holds OntoNotes' and
    the Treebank's, which another corpus's labels of the same name need not share).

    labels (Iterable[str]): The pipe's labels.
    given (Optional[Mapping[str, str]]): The user's descriptions, e.g. from
        [initialize.components.crf_ner.label_descriptions].
    dataset (Optional[str]): A key of DATASET_LABELS (e.g. the model card's source name); None: recognised.
    RETURNS (Dict[str, str]): label -> description.
    """
    given = dict(given or {})
    for label, description in given.items():
        if not isinstance(label, str) or not isinstance(description, str) or not description.strip():
            raise ValueError(
                f"label_descriptions: expected label -> non-empty description strings, got {label!r}: {description!r}."
            )
    labels = list(labels)
    if dataset not in DATASET_LABELS:
        dataset = dataset_of(labels)
    known = DATASET_LABELS.get(dataset, {}) if dataset else {}
    found = {}
    for label in labels:
        description = given.get(label) or known.get(label)
        if description:
            found[label] = description
    return found


# The glossary entries explain_labels added (spaCy's glossary is one dict for the whole process).
_EXPLAINED: Dict[str, str] = {}


def explain_labels(descriptions: Mapping[str, str]) -> Dict[str, str]:
    """Make `spacy.explain` know these labels: each one spaCy's glossary does not hold is added (a
    term it holds, such as the POS tags NR and NT, keeps spaCy's meaning).

    RETURNS (Dict[str, str]): The entries added.
    """
    added = {label: text for label, text in descriptions.items() if label not in glossary.GLOSSARY}
    glossary.GLOSSARY.update(added)
    _EXPLAINED.update(added)
    return added


def spacy_meaning(label: str) -> Optional[str]:
    """What spaCy's own glossary says a label means (None: nothing), the entries explain_labels added
    left out: a pipeline's own meanings are not spaCy's."""
    text = glossary.GLOSSARY.get(label)
    return None if text is not None and _EXPLAINED.get(label) == text else text
