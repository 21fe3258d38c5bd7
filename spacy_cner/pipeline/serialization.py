"""The saved files of a `crf_ner` pipe (cfg, vocab, model, lexicon): the weights and the vocab's
vectors with their checksums in the cfg, checked at load, and a cfg that names its file when it
cannot be read (spaCy's own files' errors are named by file_errors.py)."""

import hashlib
from functools import partial
from io import BytesIO
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import numpy
import srsly
import torch
from spacy.errors import Errors
from spacy.vectors import Vectors
from spacy.vocab import Vocab
from thinc.api import Model, PyTorchShim
from thinc.util import convert_recursive, is_xp_array

from ..layers._torch import load_weights
from ..layers.scalar_mix import tok2vec_mix_weights
from .file_errors import name_files_in_load_errors, names_file
from .lexicons import lexicons_to_bytes, load_lexicons

name_files_in_load_errors()

# How crf_ner can save its model's float weights (its save_weights setting): as they are, in float16,
# or in float16 with the embedding tables in int8 (a float32 scale per row).
SAVE_WEIGHTS = ("float32", "float16", "int8-tables")
# The layers whose "E" parameter is an embedding table (thinc's HashEmbed, spacy-cner's exact tables).
TABLE_LAYERS = ("hashembed", "key_embed")


def bytes_writers(model: Model, cfg: Dict[str, Any], vocab: Vocab, exclude) -> Dict[str, Callable[[], Any]]:
    """spacy.util.to_bytes's serializers; the weights' checksum (and the learned scalar mix, for
    reading without loading) are in cfg before cfg is written, with the vocab's vectors' checksum."""
    weights = model_bytes(model, cfg, exclude)
    cfg["vectors_sha256"] = vectors_digest(vocab) if reads_vectors(model) else None
    return {
        "cfg": lambda: srsly.json_dumps(cfg),
        "vocab": lambda: vocab.to_bytes(exclude=exclude),
        "model": lambda: weights,
        "lexicon": lambda: lexicons_to_bytes(model),
    }


def bytes_readers(
    model: Model, cfg: Dict[str, Any], vocab: Vocab, name: str, exclude
) -> Dict[str, Callable[[bytes], Any]]:
    """spacy.util.from_bytes's deserializers: cfg first, then the model checked against it."""
    return {
        "cfg": lambda b: cfg.update(srsly.json_loads(b)),
        "vocab": lambda b: vocab.from_bytes(b, exclude=exclude),
        "model": lambda b: (
            load_model(model, cfg, b, "the model in the bytes"),
            check_vectors(vocab, cfg, "the vectors of the pipeline's vocab"),
        ),
        "lexicon": lambda b: load_lexicons(model, b, "bytes", name),
    }


def file_writers(model: Model, cfg: Dict[str, Any], vocab: Vocab, exclude) -> Dict[str, Callable[[Path], Any]]:
    """spacy.util.to_disk's serializers; no "lexicon" file for a model without lexicon layers."""

    def write_lexicon(path: Path) -> None:
        data = lexicons_to_bytes(model)
        if data is not None:
            path.write_bytes(data)

    weights = model_bytes(model, cfg, exclude)
    cfg["vectors_sha256"] = vectors_digest(vocab) if reads_vectors(model) else None
    return {
        "cfg": lambda p: srsly.write_json(p, cfg),
        "vocab": lambda p: vocab.to_disk(p, exclude=exclude),
        "model": lambda p: p.write_bytes(weights),
        "lexicon": write_lexicon,
    }


def file_readers(
    model: Model, cfg: Dict[str, Any], vocab: Vocab, name: str, exclude
) -> Dict[str, Callable[[Path], Any]]:
    """spacy.util.from_disk's deserializers; a missing "lexicon" file is a model without lexicon layers."""
    return {
        "cfg": lambda p: cfg.update(read_cfg(p)),
        "vocab": lambda p: vocab.from_disk(p, exclude=exclude),
        # The vocab was read before: the pipeline's (nlp.from_disk reads it first) or the pipe's own.
        "model": lambda p: (
            load_model(model, cfg, p.read_bytes(), str(p)),
            check_vectors(vocab, cfg, _vectors_file(p)),
        ),
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
    save_weights = cfg.get("save_weights", "float32")
    data = model.to_bytes() if save_weights == "float32" else float16_model_bytes(model, save_weights == "int8-tables")
    cfg["model_sha256"] = hashlib.sha256(data).hexdigest()
    return data


def reads_vectors(model: Model) -> bool:
    """Whether the model reads the vocab's vectors (static vectors, or SoftLexicon.v2's word vectors): only
    then are they part of what the pipe was saved with (a pipe sourced into a pipeline with other vectors,
    or saved without its vocab, is not refused for vectors it never reads)."""
    return any(
        node.name in ("static_vectors", "char_bigram_vectors")
        or (node.name == "soft_lexicon" and node.attrs.get("word_vectors"))
        for node in model.walk()
    )


def vectors_digest(vocab: Vocab) -> Optional[str]:
    """sha256 of the vocab's vectors: their table (its dtype and shape too), the keys and the rows they
    map to (sorted by key), the mode and floret's settings; None for vectors of another kind."""
    vectors = vocab.vectors
    if not isinstance(vectors, Vectors):
        return None
    data = vectors.data.get() if hasattr(vectors.data, "get") else vectors.data  # cupy on a GPU
    data = numpy.ascontiguousarray(data, dtype=numpy.asarray(data).dtype.newbyteorder("<"))
    keys = numpy.fromiter(vectors.key2row.keys(), dtype="<u8", count=len(vectors.key2row))
    rows = numpy.fromiter(vectors.key2row.values(), dtype="<i8", count=len(vectors.key2row))
    order = numpy.argsort(keys, kind="stable")
    settings = [vectors.mode, data.dtype.str, data.shape, vectors.attr]
    if vectors.mode == "floret":  # its settings are saved in floret mode only
        settings += [vectors.minn, vectors.maxn, vectors.hash_count, vectors.hash_seed, vectors.bow, vectors.eow]
    digest = hashlib.sha256(srsly.json_dumps(settings).encode("utf8"))
    for part in (data, keys[order], rows[order]):
        digest.update(part.tobytes())
    return digest.hexdigest()


def check_vectors(vocab: Vocab, cfg: Dict[str, Any], source: str) -> None:
    """Refuse vectors other than those the pipe was saved with (their sha256 in cfg, when it has one):
    bit flips in vocab/vectors changed the entities with no error."""
    expected = cfg.get("vectors_sha256")
    if expected is not None and vectors_digest(vocab) != expected:
        raise names_file(
            ValueError(
                f"{source} does not match the checksum saved with the pipe in its cfg (sha256 {expected[:12]}...): the "
                "vectors are altered, or not the ones the pipeline was saved with. Restore the pipeline's files as "
                "they were saved."
            )
        )


def _vectors_file(model_file: Path) -> str:
    """The file the pipe's vectors were read from: its own vocab (pipe.to_disk) or the pipeline's."""
    for vocab_dir in (model_file.parent / "vocab", model_file.parent.parent / "vocab"):
        if (vocab_dir / "vectors").exists():
            return str(vocab_dir / "vectors")
    return "the vectors of the pipeline's vocab"


def validate_save_weights(value: str) -> str:
    if value not in SAVE_WEIGHTS:
        raise ValueError(f"save_weights must be one of {list(SAVE_WEIGHTS)}, got {value!r}.")
    return value


def float16_model_bytes(model: Model, int8_tables: bool = False) -> bytes:
    """model.to_bytes() with every float32 weight stored as float16: thinc's parameters and the
    state dicts of the torch modules (half the size; load_model computes in float32 again).
    int8_tables: the embedding tables (TABLE_LAYERS' "E", most of the default's weights) in int8
    instead, each row scaled by its largest magnitude / 127 (the scales in float32, under
    msg["int8_scales"], "node index:param name" -> scales).

    Why not thinc's own: it saves arrays as they are, and a float16 parameter would make its
    layers compute in float16; torch's quantization computes in int8 and covers only its own
    modules. Rounding every weight of the trained default to float16 changed the entities of
    almost no test doc on six datasets (BENCHMARKS.md#inference).
    """
    msg = model.to_dict()
    for node in model.walk():
        for shim in node.shims:
            if not isinstance(shim, PyTorchShim):
                raise ValueError(
                    f"save_weights 'float16' saves torch modules and thinc's parameters; the layer "
                    f"{node.name!r} holds a {type(shim).__name__}: set crf_ner's save_weights "
                    "to 'float32'."
                )
    msg["shims"] = [[_float16_shim(data) for data in shims] for shims in msg["shims"]]
    msg = convert_recursive(is_xp_array, partial(model.ops.to_numpy, byte_order="<"), msg)
    msg["params"] = [
        {
            name: value.astype("<f2") if value is not None and value.dtype == numpy.float32 else value
            for name, value in params.items()
        }
        for params in msg["params"]
    ]
    if int8_tables:
        scales = {}
        for index, (node, params) in enumerate(zip(model.walk(), msg["params"])):
            table = params.get("E") if node.name in TABLE_LAYERS else None
            if table is not None and table.ndim == 2:
                table = model.ops.to_numpy(node.get_param("E")).astype(numpy.float32)
                scale = numpy.abs(table).max(axis=1) / 127.0
                scale[scale == 0] = 1.0
                params["E"] = numpy.rint(table / scale[:, None]).astype(numpy.int8)
                scales[f"{index}:E"] = scale.astype("<f4")
        msg["int8_scales"] = scales
    return srsly.msgpack_dumps(msg)


def _float16_shim(data: bytes) -> bytes:
    """A torch shim's bytes with its state dict's float32 tensors in float16: thinc's shims (and the
    transformer's) save {"config", "state": torch.save bytes, ...}, spacy-cner's rebuildable modules
    {"hparams", "state": torch.save bytes} inside "state"."""
    msg = srsly.msgpack_loads(data)
    state = msg.get("state") if isinstance(msg, dict) else None
    if isinstance(state, bytes) and state[:2] == b"PK":  # torch.save's zip archive
        msg["state"] = _float16_state(state)
        return srsly.msgpack_dumps(msg)
    try:
        inner = srsly.msgpack_loads(state)
    except Exception:  # not msgpack: msgpack raises several kinds on arbitrary bytes
        inner = None
    if not (isinstance(inner, dict) and isinstance(inner.get("state"), bytes) and inner["state"][:2] == b"PK"):
        raise ValueError(
            "save_weights 'float16': a torch layer saved its weights in a form spacy-cner does not "
            "know; set crf_ner's save_weights to 'float32'."
        )
    inner["state"] = _float16_state(inner["state"])
    msg["state"] = srsly.msgpack_dumps(inner)
    return srsly.msgpack_dumps(msg)


def _float16_state(data: bytes) -> bytes:
    state = load_weights(data, torch.device("cpu"))
    filelike = BytesIO()
    torch.save({key: value.half() if value.dtype == torch.float32 else value for key, value in state.items()}, filelike)
    return filelike.getvalue()


def _float32_model(model: Model, data: bytes) -> None:
    """model.from_bytes, with the float16 parameters float16_model_bytes saved back in float32
    (the torch modules' load_state_dict converts their tensors itself), its int8 tables scaled back."""
    msg = srsly.msgpack_loads(data)
    for key, scale in msg.pop("int8_scales", {}).items():
        index, name = key.split(":")
        params = msg["params"][int(index)]
        params[name] = params[name].astype(numpy.float32) * scale.astype(numpy.float32)[:, None]
    msg["params"] = [
        {
            name: value.astype(numpy.float32)
            if isinstance(value, numpy.ndarray) and value.dtype == numpy.float16
            else value
            for name, value in params.items()
        }
        for params in msg["params"]
    ]
    model.from_dict(convert_recursive(is_xp_array, model.ops.asarray, msg))


def load_model(model: Model, cfg: Dict[str, Any], data: bytes, source: str) -> None:
    """Load the weights into model, after checking them against the sha256 in cfg (when it has one)."""
    expected = cfg.get("model_sha256")
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(
            f"{source} does not match the checksum saved with it in the cfg (sha256 {expected[:12]}...): "
            "the file is truncated or altered. Restore the pipeline's files as they were saved."
        )
    try:
        _float32_model(model, data)
    except AttributeError:
        raise ValueError(Errors.E149) from None
    except (ValueError, TypeError, KeyError, IndexError) as err:
        if "Refused to load" in str(err):  # a tampered transformer: its own message says what
            raise
        raise ValueError(
            f"{source} cannot be read as the model's weights ({type(err).__name__}: {err}): "
            "the file is truncated or altered."
        ) from err


def read_cfg(path: Path) -> Dict[str, Any]:
    """A saved cfg, its file named in the error when it is not JSON (srsly says only where)."""
    try:
        return srsly.read_json(path)
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}): restore the file saved with the model.") from None
