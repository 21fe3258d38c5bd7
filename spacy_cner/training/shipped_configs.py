"""The training configs shipped with the package (the repository's configs/, also inside the wheel).

`spacy init config -p crf_ner` cannot give them: spaCy fills a component it has no template for with
its factory's defaults, and crf_ner's are the plain character + bigram BiLSTM-CRF (a saved pipeline
whose config lacks a newer setting is filled from them, so they must stay what they were). The
default config also sets what no factory default can: the lexicon and vectors made at initialize,
joined sentence pairs in the corpus reader, the threshold fitted before saving.
"""

from pathlib import Path
from typing import List

# spacy_cner/configs: a link to the repository's configs/ in a checkout, its files in the wheel (package_data).
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def config_names() -> List[str]:
    """The names of the shipped configs ("default", "fast", "tener", ...)."""
    return sorted(path.stem for path in CONFIG_DIR.glob("*.cfg"))


def config_path(name: str = "default") -> Path:
    """The path of a shipped config, e.g. `spacy.util.load_config(config_path("default"))`."""
    path = CONFIG_DIR / f"{name}.cfg"
    if not path.is_file():
        raise ValueError(f"No shipped config named {name!r}: choose one of {', '.join(config_names())}.")
    return path
