"""The saved files of a `crf_ner` pipe (cfg, vocab, model, lexicon): the weights with their checksum
in the cfg, checked at load, and a cfg that names its file when it cannot be read."""
import hashlib
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import srsly
from spacy.errors import Errors
from spacy.vocab import Vocab
from thinc.api import Model

from ..layers.scalar_mix import tok2vec_mix_weights
from .lexicons import lexicons_to_bytes, load_lexicons


def bytes_writers(model: Model, cfg: Dict[str, Any], vocab: Vocab, exclude) -> Dict[str, Callable[[], Any]]:
    """spacy.util.to_bytes's serializers; the weights' checksum (and the learned scalar mix, for
    reading without loading) are in cfg before cfg is written."""
    weights = model_bytes(model, cfg, exclude)
    return {
        "cfg": lambda: srsly.json_dumps(cfg),
        "vocab": lambda: vocab.to_bytes(exclude=exclude),
        "model": lambda: weights,
        "lexicon": lambda: lexicons_to_bytes(model),
    }


def bytes_readers(model: Model, cfg: Dict[str, Any], vocab: Vocab, name: str, exclude) -> Dict[str, Callable[[bytes], Any]]:
    """spacy.util.from_bytes's deserializers: cfg first, then the model checked against it."""
    return {
        "cfg": lambda b: cfg.update(srsly.json_loads(b)),
        "vocab": lambda b: vocab.from_bytes(b, exclude=exclude),
        "model": lambda b: load_model(model, cfg, b, "the model in the bytes"),
        "lexicon": lambda b: load_lexicons(model, b, "bytes", name),
    }


def file_writers(model: Model, cfg: Dict[str, Any], vocab: Vocab, exclude) -> Dict[str, Callable[[Path], Any]]:
    """spacy.util.to_disk's serializers; no "lexicon" file for a model without lexicon layers."""

    def write_lexicon(path: Path) -> None:
        data = lexicons_to_bytes(model)
        if data is not None:
            path.write_bytes(data)

    weights = model_bytes(model, cfg, exclude)
    return {
        "cfg": lambda p: srsly.write_json(p, cfg),
        "vocab": lambda p: vocab.to_disk(p, exclude=exclude),
        "model": lambda p: p.write_bytes(weights),
        "lexicon": write_lexicon,
    }


def file_readers(model: Model, cfg: Dict[str, Any], vocab: Vocab, name: str, exclude) -> Dict[str, Callable[[Path], Any]]:
    """spacy.util.from_disk's deserializers; a missing "lexicon" file is a model without lexicon layers."""
    return {
        "cfg": lambda p: cfg.update(read_cfg(p)),
        "vocab": lambda p: vocab.from_disk(p, exclude=exclude),
        "model": lambda p: load_model(model, cfg, p.read_bytes(), str(p)),
        "lexicon": lambda p: load_lexicons(model, p.read_bytes(), str(p), name) if p.exists() else None,
    }


def model_bytes(model: Model, cfg: Dict[str, Any], exclude) -> Optional[bytes]:
    """The model's bytes, their sha256 recorded in cfg (saved with them, checked at load); None
    when "model" is excluded. The tok2vec's learned scalar mix, if any, is recorded in cfg too."""
    weights = tok2vec_mix_weights(model)
    if weights is not None:
        cfg["scalar_mix"] = weights
    if "model" in exclude:
        cfg.pop("model_sha256", None)  # nothing to check it against
        return None
    data = model.to_bytes()
    cfg["model_sha256"] = hashlib.sha256(data).hexdigest()
    return data


def load_model(model: Model, cfg: Dict[str, Any], data: bytes, source: str) -> None:
    """Load the weights into model, after checking them against the sha256 in cfg (when it has one)."""
    expected = cfg.get("model_sha256")
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(
            f"{source} does not match the checksum saved with it in the cfg (sha256 {expected[:12]}...): "
            "the file is truncated or altered. Restore the pipeline's files as they were saved."
        )
    try:
        model.from_bytes(data)
    except AttributeError:
        raise ValueError(Errors.E149) from None
    except (ValueError, TypeError, KeyError, IndexError) as err:
        if "Refused to load" in str(err):  # a tampered transformer: its own message says what
            raise
        raise ValueError(f"{source} cannot be read as the model's weights ({type(err).__name__}: {err}): "
                         "the file is truncated or altered.") from err


def read_cfg(path: Path) -> Dict[str, Any]:
    """A saved cfg, its file named in the error when it is not JSON (srsly says only where)."""
    try:
        return srsly.read_json(path)
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}): restore the file saved with the model.") from None
