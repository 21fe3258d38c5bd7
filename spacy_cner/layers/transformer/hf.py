"""Loading a Hugging Face model and running it: spacy-transformers' HFWrapper and HFShim,
with the shim's memory and weights-loading fixes and hidden states of every layer."""

import warnings
from io import BytesIO
from typing import Any, Callable, Dict, Tuple

import srsly
import torch
from spacy_transformers.layers.hf_shim import HFShim
from spacy_transformers.layers.transformer_model import huggingface_from_pretrained
from thinc.api import ArgsKwargs, Model, get_torch_default_device, torch2xp, xp2torch

from ...backends.precision import mixed_precision
from ..entity_attention import ScaleAttentionScores
from .._torch import finish_update_in_place, load_weights, predict_in_eval_mode, use_params_in_place


# The tokenizer settings spacy-transformers saves ({"use_fast": ...}); any other is refused at load:
# from_pretrained's kwargs can ask it to run code shipped in the saved files (trust_remote_code).
SAVED_TOKENIZER_KWARGS = frozenset({"use_fast"})


def check_saved_transformer(msg: Dict[str, Any]) -> None:
    """Refuse a saved transformer whose tokenizer settings or file names could run code or write
    outside the temporary folder they are unpacked into (a tampered pipeline)."""
    files = dict(msg.get("tokenizer") or {})
    kwargs = files.pop("kwargs", None) or {}
    unknown = sorted(set(kwargs) - SAVED_TOKENIZER_KWARGS) if isinstance(kwargs, dict) else ["(not a dict)"]
    if unknown:
        raise ValueError(
            f"Refused to load the transformer's tokenizer: settings {unknown} are not ones spacy-transformers "
            f"saves (only {sorted(SAVED_TOKENIZER_KWARGS)}); the pipeline's crf_ner/model has been altered."
        )
    for name in files:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ValueError(
                f"Refused to load the transformer's tokenizer: the file name {name!r} is not a plain file "
                "name; the pipeline's crf_ner/model has been altered."
            )
    for key in ("_init_tokenizer_config", "_init_transformer_config"):
        if (msg.get(key) or {}).get("trust_remote_code"):
            raise ValueError(
                f"Refused to load the transformer: its saved {key} sets trust_remote_code, which would run "
                "code from the model's files; the pipeline's crf_ner/model has been altered."
            )


def attention_as_loaded(msg: Dict[str, Any], transformer_config: Dict[str, Any]) -> Dict[str, Any]:
    """A saved transformer's config, to build the model with the attention kernel from_pretrained chose
    for it (scaled-dot-product attention where the model has it), or eager attention where
    transformer_config (the layer's setting) asks for it. Why: the saved config says the kernel was
    chosen ("_attn_implementation_autoset") but not which, so from_config fell back to eager attention,
    slower than sdpa, in every loaded pipeline."""
    config = dict(msg["config"])
    if dict(transformer_config or {}).get("attn_implementation") != "eager":
        config.pop("_attn_implementation_autoset", None)  # from_config chooses again, as from_pretrained did
    return config


class InPlaceHFShim(HFShim):
    """spacy-transformers' HFShim with a finish_update that does not leak memory and a
    use_params that reads the optimizer's averages, a predict that stays in evaluation mode
    (thread-safe; see _torch), and a from_bytes that loads
    the weights with weights_only=True (_torch.load_weights) and refuses tokenizer settings and
    file names that could run code (check_saved_transformer), with the attention kernel from_pretrained
    chose (attention_as_loaded); its mixed precision on a GPU is bfloat16 where the GPU has it
    (backends.precision.mixed_precision; float16 before).
    """

    def predict(self, inputs):
        with mixed_precision(self.device, self._mixed_precision):
            return predict_in_eval_mode(self, inputs)

    def begin_update(self, inputs):
        with mixed_precision(self.device, self._mixed_precision):
            return super().begin_update(inputs)

    def finish_update(self, optimizer) -> None:
        finish_update_in_place(self, optimizer)

    def use_params(self, params):
        return use_params_in_place(self, params)

    def from_bytes(self, bytes_data: bytes) -> "InPlaceHFShim":
        """HFShim.from_bytes, which reads the weights with torch.load's default (pickled code
        runs on torch < 2.6): its config and tokenizer, then the weights through load_weights.
        """
        msg = srsly.msgpack_loads(bytes_data)
        check_saved_transformer(msg)
        if not msg["config"]:  # saved before initialize: no weights
            return super().from_bytes(bytes_data)
        device = get_torch_default_device()
        state = load_weights(msg["state"], device)
        # HFShim builds the model and tokenizer from the config; its weights come below.
        blank = BytesIO()
        torch.save({}, blank)
        with warnings.catch_warnings():
            # It warns that the (empty) state does not match the model.
            warnings.filterwarnings("ignore", message="Error loading saved torch state_dict")
            # Under TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD it warns of loading the empty state unsafely.
            warnings.filterwarnings("ignore", message="Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
            config = attention_as_loaded(msg, self._hfmodel._init_transformer_config)
            rebuilt = {**msg, "config": config, "state": blank.getvalue()}
            super().from_bytes(srsly.msgpack_dumps(rebuilt))
        try:
            self._model.load_state_dict(state)
        except RuntimeError as error:
            # As HFShim does: weights saved by another transformers version may differ in buffers.
            warnings.warn(f"Loading the transformer's weights with strict=False: {error}")
            self._model.load_state_dict(state, strict=False)
        self._model.to(device)
        return self


def load_pretrained(transformer: Model, name: str) -> None:
    """Load the HFWrapper's pretrained model and tokenizer (once: a deserialized model has them).

    name: a Hugging Face hub name or a local folder.
    """
    shim = transformer.shims[0]
    if shim._hfmodel.transformer is None:
        hf_objects = huggingface_from_pretrained(
            name,
            dict(shim._hfmodel._init_tokenizer_config),
            dict(shim._hfmodel._init_transformer_config),
        )
        shim._model = hf_objects.transformer
        shim._hfmodel = hf_objects


def run_transformer(transformer: Model, batch: Dict[str, Any], is_train: bool):
    """The HFWrapper's hidden states (n_layers, batch, length, width) and their backprop; with an
    "entity_scale" in the batch, the scores of every attention softmax scaled (entity_attention)."""
    if "entity_scale" in batch:
        hf_model = transformer.shims[0]._hfmodel.transformer
        scale = torch.as_tensor(batch["entity_scale"], device=hf_model.device)[:, None]
        with ScaleAttentionScores(scale) as mode:
            layers, backprop_layers = transformer(batch, is_train)
        if mode.n_scaled < hf_model.config.num_hidden_layers:
            raise ValueError(
                f"entity_attention_scale scaled the attention scores of {mode.n_scaled} of "
                f"{hf_model.config.num_hidden_layers} layers of {type(hf_model).__name__}: it needs "
                "attention computed through torch's softmax (eager attention, as in BERT, RoBERTa "
                "and NEZHA). Set entity_attention_scale = 0 for this model."
            )
    else:
        # shape: (n_layers, batch, length, width)
        layers, backprop_layers = transformer(batch, is_train)
    return layers, backprop_layers


def convert_inputs(model: Model, batch: Dict[str, Any], is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """The HF model's keyword arguments for one batch of windows (no gradient into the inputs)."""
    device = model.shims[0]._hfmodel.transformer.device
    kwargs = {
        "input_ids": xp2torch(model.ops.asarray(batch["input_ids"]), device=device),
        "attention_mask": xp2torch(model.ops.asarray(batch["attention_mask"]), device=device),
        "output_hidden_states": model.attrs["all_layers"],
        "return_dict": True,
    }
    if "entity_scale" in batch:
        # Fused attention kernels (sdpa) fall back to eager attention, whose softmax can be scaled.
        kwargs["output_attentions"] = True
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: []


def convert_outputs(model: Model, inputs_outputs, is_train: bool):
    """Stack the hidden states used, (n_layers, batch, length, width); backprop into each of them."""
    _, output = inputs_outputs
    tensors = tuple(output.hidden_states) if model.attrs["all_layers"] else (output.last_hidden_state,)
    layers = model.ops.xp.stack([torch2xp(tensor.detach().float()) for tensor in tensors])

    def backprop(d_layers) -> ArgsKwargs:
        grads = [
            xp2torch(model.ops.asarray(d_layers[i]), device=tensor.device).to(tensor.dtype)
            for i, tensor in enumerate(tensors)
        ]
        return ArgsKwargs(args=(list(tensors),), kwargs={"grad_tensors": grads})

    return layers, backprop
