"""The saved files of a `crf_ner` pipe: the weights with their checksum in the cfg, checked at load,
and a cfg that names its file when it cannot be read."""
import hashlib
from pathlib import Path
from typing import Any, Dict, Optional

import srsly
from spacy.errors import Errors
from thinc.api import Model


def model_bytes(model: Model, cfg: Dict[str, Any], exclude) -> Optional[bytes]:
    """The model's bytes, their sha256 recorded in cfg (saved with them, checked at load); None
    when "model" is excluded."""
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
