"""The lexicons of a `crf_ner` model's lexicon layers (LEBERT's adapter, SoftLexicon): set at
initialize, saved with the pipe under its own key, given back at load."""

import zlib
from typing import List, Optional

import srsly
from thinc.api import Model

from ..layers.lexicon_slot import layer_lexicon, set_lexicon
from ..lexicon import Lexicon

# The first byte of zlib's output at its default window (zlib.compress).
_ZLIB_HEADER = b"\x78"


def lexicon_layers(model: Model) -> List[Model]:
    """The layers that read the lexicon: lexicon adapters and soft lexicons."""
    return [node for node in model.walk() if node.name in ("lexicon_adapter", "soft_lexicon")]


def lexicons_to_bytes(model: Model) -> Optional[bytes]:
    """The lexicon of each lexicon layer (vectors in float16), zlib-compressed (jieba's
    dictionary to about a quarter, quick to decompress: BENCHMARKS.md#lexicon), or None without any."""
    lexicons = [layer_lexicon(layer) for layer in lexicon_layers(model)]
    if not lexicons or any(lexicon is None for lexicon in lexicons):
        return None
    return zlib.compress(srsly.msgpack_dumps([lexicon.to_bytes() for lexicon in lexicons]), 6)


def load_lexicons(model: Model, data: Optional[bytes], source: str, name: str) -> None:
    """Give each lexicon layer its saved lexicon (data from lexicons_to_bytes; None: none saved)."""
    if data is None:
        return
    layers = lexicon_layers(model)
    try:
        if data[:1] == _ZLIB_HEADER:  # a msgpack list starts with 0x90-0x9f or 0xdc-0xdd (earlier versions)
            data = zlib.decompress(data)
        lexicons = [Lexicon.from_bytes(lexicon) for lexicon in srsly.msgpack_loads(data)]
    except (zlib.error, ValueError, TypeError, KeyError) as err:
        raise ValueError(
            f"{source} is not a readable lexicon ({err}): the file is truncated or altered. Restore the "
            "pipeline's files as they were saved."
        ) from err
    if len(lexicons) != len(layers):
        raise ValueError(
            f"{source} holds {len(lexicons)} lexicons but the model of '{name}' has {len(layers)} lexicon layers."
        )
    for layer, lexicon in zip(layers, lexicons):
        set_lexicon(layer, lexicon)


def warm_up_lexicons(model: Model) -> None:
    """Build what the lexicon layers otherwise build on the first doc: each lexicon's prefix index and
    gazetteer types, and, for a soft lexicon with softword, the segmenter (rjieba's dictionary, or jieba's)."""
    from ..pretrained.jieba_segmenter import jieba_words

    for layer in lexicon_layers(model):
        lexicon = layer_lexicon(layer)
        if lexicon is None:
            continue
        lexicon.prefixes  # noqa: B018  built on first use
        lexicon.entity_types()
        if layer.attrs.get("softword"):
            jieba_words("预热")


def set_model_lexicon(model: Model, lexicon: Optional[Lexicon], name: str) -> None:
    """Give every lexicon layer (adapter, soft lexicon) in the model the lexicon; None: leave them."""
    layers = lexicon_layers(model)
    if lexicon is None:
        return
    if not layers:
        raise ValueError(
            f"'{name}' got a lexicon but its model has no layer that reads one: add "
            "spacy-cner.LexiconAdapter.v1 as the lexicon_adapter of the tok2vec "
            "(see configs/lexicon.cfg) or spacy-cner.SoftLexicon.v1 as its soft_lexicon "
            "(configs/default.cfg), or remove the lexicon from [initialize.components]."
        )
    for layer in layers:
        set_lexicon(layer, lexicon)
