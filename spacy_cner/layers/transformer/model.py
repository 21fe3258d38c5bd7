"""The thinc layer: TransformerTok2Vec (spacy-cner.TransformerTok2Vec.v1)."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_wrapper import HFWrapper
from thinc.api import Model
from thinc.types import Floats2d

from ...backends.batching import padded_buckets
from ..attention_window import check_window
from ..entity_attention import check_gold, check_scale, with_gold, wordpiece_entity_scale
from ...long_docs import Window
from .._torch import torch_module
from ..lexicon_adapter import backward_unscaled, lexicon_hook
from ..scalar_mix import ScalarMix
from . import TRANSFORMER_TOK2VEC, InT, OutT
from .batch import window_batch, window_geometry
from .hf import InPlaceHFShim, convert_inputs, convert_outputs, load_pretrained, run_transformer
from .wordpieces import plan_docs, token_rows


# What one more transformer call costs beside its positions, in positions (backends.batching.padded_buckets),
# by device type: on a CPU a call's fixed cost is that of a few dozen positions of a tiny encoder (a large
# one's positions cost more, so it pads less); on a GPU the kernels of every layer launch once per call
# and thousands of positions run in parallel.
CALL_COST_POSITIONS = {"cpu": 64, "cuda": 2048}


def TransformerTok2Vec(
    *,
    name: str,
    scalar_mix: bool,
    window_size: int,
    max_batch_windows: int,
    attention_window: Optional[int],
    entity_attention_scale: float,
    lexicon_adapter: Optional[Model],
    lexicon_layer: int,
    tokenizer_config: Dict[str, Any],
    transformer_config: Dict[str, Any],
    mixed_precision: bool,
    grad_scaler_config: Dict[str, Any],
) -> Model[InT, OutT]:
    """The tok2vec that spacy-cner.TransformerTok2Vec.v1 builds: its arguments, every one named (their defaults and
    documentation are the registered function's, in __init__.py, the one signature a config is checked against)."""
    check_scale(entity_attention_scale, "TransformerTok2Vec")
    check_window(attention_window, "TransformerTok2Vec")
    if lexicon_layer < 0:
        raise ValueError(f"lexicon_layer must be 0 (the embeddings) or a layer number, got {lexicon_layer}.")
    hf_objects = HFObjects(None, None, None, dict(tokenizer_config), dict(transformer_config))
    transformer = HFWrapper(
        hf_objects,
        convert_inputs=convert_inputs,
        convert_outputs=convert_outputs,
        mixed_precision=mixed_precision,
        grad_scaler_config=dict(grad_scaler_config),
    )
    transformer.shims[0].__class__ = InPlaceHFShim
    transformer.attrs["all_layers"] = scalar_mix
    layers = [transformer]
    refs = {"transformer": transformer}
    if scalar_mix:
        mix = ScalarMix()
        layers.append(mix)
        refs["scalar_mix"] = mix
    if lexicon_adapter is not None:
        layers.append(lexicon_adapter)
        refs["lexicon_adapter"] = lexicon_adapter
    return Model(
        TRANSFORMER_TOK2VEC,
        forward,
        init=init,
        layers=layers,
        refs=refs,
        dims={"nO": None},
        attrs={
            "name": name,
            "window_size": window_size,
            "max_batch_windows": max_batch_windows,
            "attention_window": attention_window,
            "entity_attention_scale": entity_attention_scale,
            "lexicon_layer": lexicon_layer,
        },
    )


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Load the pretrained model (once: a deserialized model already has its weights)."""
    transformer = model.get_ref("transformer")
    load_pretrained(transformer, model.attrs["name"])
    shim = transformer.shims[0]
    config = shim._hfmodel.transformer.config
    model.set_dim("nO", config.hidden_size, force=True)
    if model.has_ref("scalar_mix"):
        mix = model.get_ref("scalar_mix")
        if not mix.has_dim("nL"):
            mix.set_dim("nL", config.num_hidden_layers + 1)
        if not mix.has_param("alpha"):
            mix.initialize()
    if model.has_ref("lexicon_adapter"):
        if model.attrs["lexicon_layer"] > config.num_hidden_layers:
            raise ValueError(
                f"lexicon_layer is {model.attrs['lexicon_layer']} but {type(shim._model).__name__} has "
                f"{config.num_hidden_layers} layers."
            )
        adapter = model.get_ref("lexicon_adapter")
        adapter.set_dim("nI", config.hidden_size, force=True)
        adapter.initialize()


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Windows -> transformer -> (scalar mix) -> mean over each token's wordpieces."""
    docs, entity_ids = with_gold(X)
    hf_objects = model.get_ref("transformer").shims[0]._hfmodel
    tokenizer = hf_objects.tokenizer
    if tokenizer is None:
        raise ValueError("The transformer is not loaded: initialize the pipeline (or load a saved one) first.")
    width = model.get_dim("nO")
    max_length, content_offset = window_geometry(hf_objects.transformer.config, tokenizer, model.attrs["window_size"])
    adapter = model.get_ref("lexicon_adapter") if model.has_ref("lexicon_adapter") else None
    # Set by CRFTagger(sentence_encoding=True): each sentence in a window of its own.
    every_sentence = model.attrs.get("sentence_windows", False)
    plans = plan_docs(docs, tokenizer, max_length, adapter, every_sentence)
    windows = [(d, window) for d, plan in enumerate(plans) for window in plan.windows]
    beta = model.attrs.get("entity_attention_scale", 0.0)
    if entity_ids is not None:
        check_gold(entity_ids, [len(doc) for doc in docs], "TransformerTok2Vec")
        if not (is_train and beta):
            entity_ids = None
    row_of_window = {}  # window index -> row of its first wordpiece in all_rows
    outputs, backprops = [], []
    offset = 0
    device = hf_objects.transformer.device
    call_cost = CALL_COST_POSITIONS.get(device.type, CALL_COST_POSITIONS["cuda"])
    for chunk in _chunks(windows, None if is_train else model.attrs["max_batch_windows"], call_cost):
        items = [(plans[windows[i][0]], windows[i][1]) for i in chunk]
        batch = window_batch(
            tokenizer,
            items,
            content_offset,
            model.attrs.get("attention_window"),
            adapter.attrs["max_words_per_char"] if adapter is not None else None,
        )
        if entity_ids is not None:
            batch["entity_scale"] = wordpiece_entity_scale(
                [plan.wordpiece_tokens[w.start : w.end] for plan, w in items],
                [entity_ids[windows[i][0]] for i in chunk],
                batch["input_ids"].shape[1],
                content_offset,
                beta,
            )
        rows, backprop_chunk = _encode(model, batch, is_train)
        n_steps = batch["input_ids"].shape[1]
        for position, i in enumerate(chunk):
            row_of_window[i] = offset + position * n_steps + content_offset
        offset += rows.shape[0]
        outputs.append(rows)
        backprops.append(backprop_chunk)
    all_rows = model.ops.xp.concatenate(outputs) if outputs else model.ops.alloc2f(0, width)
    gather, lengths = token_rows(model.ops, plans, windows, row_of_window)
    # Tokens without wordpieces (whitespace, control characters the tokenizer drops) get
    # zeros; thinc's reduce_mean reads out of bounds when no token has any.
    if len(gather):
        tokens = model.ops.reduce_mean(all_rows[gather], lengths)
    else:
        tokens = model.ops.alloc2f(len(lengths), width)
    splits = numpy.cumsum([len(doc) for doc in docs])[:-1]
    Y = model.ops.xp.split(tokens, splits.tolist()) if docs else []

    def backprop(dY: OutT) -> InT:
        if not len(gather):
            return X
        d_tokens = model.ops.xp.concatenate(dY)
        d_gathered = model.ops.backprop_reduce_mean(d_tokens, lengths)
        d_rows = model.ops.alloc2f(*all_rows.shape)
        model.ops.scatter_add(d_rows, gather, d_gathered)
        start = 0
        for rows, backprop_chunk in zip(outputs, backprops):
            backprop_chunk(d_rows[start : start + rows.shape[0]])
            start += rows.shape[0]
        return X

    return Y, backprop


def _chunks(windows: List[Tuple[int, Window]], size: Optional[int], call_cost: float) -> List[List[int]]:
    """Window indices per transformer call: all at once in training (size None: one backward
    pass), else at most `size` windows of similar length at a time (backends.batching.padded_buckets:
    the cut of the windows sorted by length that computes the fewest positions, padding included,
    counting call_cost positions per call), so that a long doc needs only a chunk's hidden states at a
    time and a long window does not pad the short ones to its length."""
    if size is None:
        return [list(range(len(windows)))] if windows else []
    lengths = [window.end - window.start for _, window in windows]
    return padded_buckets(lengths, max_items=max(1, size), call_cost=call_cost)


def _encode(model: Model, batch: Dict[str, Any], is_train: bool) -> Tuple[Floats2d, Callable]:
    """Run one padded batch of windows; rows (batch * length, width) and their backprop."""
    transformer = model.get_ref("transformer")
    adapter = model.get_ref("lexicon_adapter") if model.has_ref("lexicon_adapter") else None
    if adapter is None:
        layers, backprop_layers = run_transformer(transformer, batch, is_train)
    else:
        hf_model = transformer.shims[0]._hfmodel.transformer
        with lexicon_hook(adapter, hf_model, model.attrs["lexicon_layer"], batch["word_ids"], is_train):
            layers, backprop_layers = run_transformer(transformer, batch, is_train)
    n_layers, n_windows, n_steps, width = layers.shape
    flat = layers.reshape(n_layers, n_windows * n_steps, width)
    if model.has_ref("scalar_mix"):
        (rows,), backprop_mix = model.get_ref("scalar_mix")([flat], is_train)
    else:
        rows = flat[-1]

        def backprop_mix(d_rows):
            return [d_rows[0][None]]

    def backprop(d_rows: Floats2d) -> None:
        (d_flat,) = backprop_mix([d_rows])
        d_layers = d_flat.reshape(n_layers, n_windows, n_steps, width)
        if adapter is not None:
            # The grad scaler scales the adapter's gradients but unscales only the transformer's.
            scaler = transformer.shims[0]._grad_scaler
            backward_unscaled(torch_module(adapter), scaler, lambda: backprop_layers(d_layers))
        else:
            backprop_layers(d_layers)

    return rows, backprop
