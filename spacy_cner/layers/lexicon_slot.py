"""The lexicon slot of the lexicon layers (LEBERT's lexicon adapter, SoftLexicon): the lexicon a layer
matches at run time, kept in model.attrs["lexicon"] and not saved with the layer's weights (the pipe saves
it under its own key, crf_ner's to_disk "lexicon", as side data from initialize)."""

from typing import Dict, Optional, Tuple

import numpy
from spacy.strings import hash_string
from thinc.api import Model, NumpyOps
from thinc.model import serialize_attr

from ..lexicon import Lexicon

# Hashed rows per word of a trained word table (the lexicon adapter's), and their seed.
HASHES = 2
HASH_SEED = 17


class LexiconSlot:
    """The lexicon of a lexicon layer, for matching at run time.

    Not saved with the layer's weights: the pipe saves it under its own key (crf_ner's
    to_disk "lexicon"), as side data from initialize.
    """

    def __init__(self, lexicon: Optional[Lexicon] = None) -> None:
        self.lexicon = lexicon
        self._rows: Optional[Tuple[Tuple[int, bool], numpy.ndarray]] = None

    def rows(self, n_rows: int, hashed: bool) -> numpy.ndarray:
        """Per word, its rows of the embedding table (n_words, HASHES or 1); cached."""
        key = (n_rows, hashed)
        if self._rows is None or self._rows[0] != key:
            words = self.lexicon.words
            if not words:
                rows = numpy.zeros((0, HASHES if hashed else 1), dtype="int64")
            elif hashed:
                keys = numpy.fromiter((hash_string(word) for word in words), dtype="uint64", count=len(words))
                rows = NumpyOps().hash(keys, HASH_SEED)[:, :HASHES].astype("int64") % n_rows
            else:
                rows = numpy.arange(len(words), dtype="int64")[:, None]
            self._rows = (key, rows)
        return self._rows[1]

    def __getstate__(self) -> Dict:
        return {"lexicon": self.lexicon, "_rows": None}


@serialize_attr.register(LexiconSlot)
def _serialize_slot(_, value: LexiconSlot, name: str, model: Model) -> bytes:
    # thinc leaves out attrs whose serializer raises TypeError.
    raise TypeError("The lexicon is saved by the pipe, not with the model.")


def set_lexicon(model: Model, lexicon: Lexicon) -> None:
    """Give a lexicon layer (adapter or soft lexicon) its lexicon (before initialize, and after loading)."""
    model.attrs["lexicon"] = LexiconSlot(lexicon)


def layer_lexicon(model: Model) -> Optional[Lexicon]:
    """A lexicon layer's lexicon (None before one is set)."""
    return model.attrs["lexicon"].lexicon


def required_lexicon(model: Model) -> Lexicon:
    """The lexicon of a lexicon layer (adapter or soft lexicon), or an error saying how to set one."""
    lexicon = layer_lexicon(model)
    if lexicon is None:
        raise ValueError(
            f"The {model.name} layer has no lexicon. The crf_ner pipe gives it one at initialize, e.g. from\n"
            '[initialize.components.crf_ner.lexicon]\n@misc = "spacy-cner.lexicon.v1"\nsource = "jieba"\n'
            "(or lexicon= to the pipe's initialize), and when it loads; a model loaded on its own "
            "needs spacy_cner.layers.lexicon_slot.set_lexicon."
        )
    return lexicon
