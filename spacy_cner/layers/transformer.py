"""A Hugging Face transformer as a spaCy tok2vec, with every hidden layer fine-tuned.

Loading, the tokenizer and serialisation are spacy-transformers' (HFWrapper,
huggingface_from_pretrained), so any BERT-style model works by name or local path,
and a saved or packaged pipeline carries its weights, config and vocab.
Unlike spacy-transformers' TransformerModel, which backpropagates into
last_hidden_state only, the backward pass here feeds the gradient of every hidden
state it uses into the transformer: with a scalar mix (NEZHA paper eqs. 11-12)
all L + 1 layers are fine-tuned through the mix.

Long docs are split at sentence ends into windows the model can take
(spacy_cner.long_docs); tokens get the mean of their wordpieces' vectors.
"""
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy
import srsly
import torch
from spacy.tokens import Doc
from spacy.util import SimpleFrozenDict, registry
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from spacy_transformers.layers.hf_wrapper import HFWrapper
from spacy_transformers.layers.transformer_model import huggingface_from_pretrained
from thinc.api import ArgsKwargs, Model, get_torch_default_device, torch2xp, xp2torch
from thinc.types import Floats2d, Ints1d

from ..attention_window import allowed_keys, check_window
from ..entity_attention import ScaleAttentionScores, check_gold, check_scale, with_gold, wordpiece_entity_scale
from ..long_docs import Window, ends_sentence, split_windows
from ._torch import finish_update_in_place, load_weights, torch_module
from .lexicon_adapter import fuse, word_ids
from .scalar_mix import ScalarMix

# The docs, or (docs, gold entity ids per doc) in crf_ner's update (entity_attention).
InT = Union[List[Doc], Tuple[List[Doc], List[Ints1d]]]
OutT = List[Floats2d]


@registry.architectures("spacy-cner.TransformerTok2Vec.v1")
def TransformerTok2Vec(
    name: str,
    scalar_mix: bool = True,
    window_size: int = 0,
    max_batch_windows: int = 64,
    attention_window: Optional[int] = None,
    entity_attention_scale: float = 0.0,
    lexicon_adapter: Optional[Model] = None,
    lexicon_layer: int = 1,
    tokenizer_config: Dict[str, Any] = SimpleFrozenDict(),
    transformer_config: Dict[str, Any] = SimpleFrozenDict(),
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = SimpleFrozenDict(),
) -> Model[InT, OutT]:
    """Token vectors from a Hugging Face encoder (BERT, RoBERTa-style, NEZHA).

    name (str): Model name on the Hugging Face hub or a local path, e.g. "bert-base-chinese".
        Read at initialize only: a saved pipeline carries the weights.
    scalar_mix (bool): Mix all L + 1 hidden states with trained weights (spacy-cner.ScalarMix.v1);
        False uses the last layer.
    window_size (int): Most wordpieces per window, special tokens included; 0 is the model's maximum.
    max_batch_windows (int): At prediction, windows per transformer call (bounds memory on long docs).
    attention_window (Optional[int]): Sliding-window constraint (Wang, Wang and Shen 2024, eq. 18):
        a wordpiece attends only to wordpieces whose tokens are at most this many tokens away
        (special tokens sit just before the first and after the last token), through a 3-D
        attention mask, in training and prediction; None attends to the whole window.
    entity_attention_scale (float): Entity-label enhancement, beta of Wang, Wang and Shen
        2024 (eqs. 15-16): in training, the attention scores (before the softmax) between
        wordpieces of the same gold entity are multiplied by 1 + beta in every layer and
        head (crf_ner provides the gold entities); 0 turns it off. Prediction is unchanged.
        Needs attention computed through a softmax (eager attention); models whose
        attention kernel fuses it away raise an error.
    lexicon_adapter (Optional[Model]): spacy-cner.LexiconAdapter.v1 (LEBERT): fuses the
        lexicon words that cover each wordpiece's characters into its hidden state after
        transformer layer lexicon_layer, so the layers above it (and the scalar mix of
        hidden states lexicon_layer...L) see them. Special tokens get no words.
    lexicon_layer (int): k, the layer after which the adapter runs (1 = after the first
        layer, LEBERT's best; 0 = on the embedding output).
    tokenizer_config (Dict[str, Any]): Keyword arguments for the tokenizer's from_pretrained.
    transformer_config (Dict[str, Any]): Keyword arguments for the model config's from_pretrained.
    mixed_precision (bool): Run the transformer in mixed precision (GPU).
    grad_scaler_config (Dict[str, Any]): Settings of the gradient scaler for mixed precision.
    RETURNS (Model[List[Doc], List[Floats2d]]): The tok2vec.
    """
    check_scale(entity_attention_scale, "TransformerTok2Vec")
    check_window(attention_window, "TransformerTok2Vec")
    if lexicon_layer < 0:
        raise ValueError(f"lexicon_layer must be 0 (the embeddings) or a layer number, got {lexicon_layer}.")
    hf_objects = HFObjects(None, None, None, dict(tokenizer_config), dict(transformer_config))
    transformer = HFWrapper(
        hf_objects,
        convert_inputs=_convert_inputs,
        convert_outputs=_convert_outputs,
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
        "transformer_tok2vec",
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


class InPlaceHFShim(HFShim):
    """spacy-transformers' HFShim with a finish_update that does not leak memory (see _torch),
    and a from_bytes that loads the weights with weights_only=True (_torch.load_weights).
    """

    def finish_update(self, optimizer) -> None:
        finish_update_in_place(self, optimizer)

    def from_bytes(self, bytes_data: bytes) -> "InPlaceHFShim":
        """HFShim.from_bytes, which reads the weights with torch.load's default (pickled code
        runs on torch < 2.6): its config and tokenizer, then the weights through load_weights.
        """
        msg = srsly.msgpack_loads(bytes_data)
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
            super().from_bytes(srsly.msgpack_dumps({**msg, "state": blank.getvalue()}))
        try:
            self._model.load_state_dict(state)
        except RuntimeError as error:
            # As HFShim does: weights saved by another transformers version may differ in buffers.
            warnings.warn(f"Loading the transformer's weights with strict=False: {error}")
            self._model.load_state_dict(state, strict=False)
        self._model.to(device)
        return self


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Load the pretrained model (once: a deserialized model already has its weights)."""
    transformer = model.get_ref("transformer")
    shim = transformer.shims[0]
    if shim._hfmodel.transformer is None:
        hf_objects = huggingface_from_pretrained(
            model.attrs["name"],
            dict(shim._hfmodel._init_tokenizer_config),
            dict(shim._hfmodel._init_transformer_config),
        )
        shim._model = hf_objects.transformer
        shim._hfmodel = hf_objects
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


@dataclass
class DocPlan:
    """How one doc is fed to the transformer."""

    input_ids: List[int]  # the doc's wordpieces, no special tokens
    windows: List[Window]
    token_wordpieces: Ints1d  # wordpiece indices of token 0, then token 1, ...
    token_lengths: Ints1d  # number of wordpieces per token (0 for whitespace)
    # Per wordpiece, the index of the first token it overlaps (of the one before, if none).
    wordpiece_tokens: List[int]
    # With a lexicon adapter: per wordpiece, the indices of its lexicon words, -1 for none.
    wordpiece_words: Optional[numpy.ndarray] = None


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Windows -> transformer -> (scalar mix) -> mean over each token's wordpieces."""
    docs, entity_ids = with_gold(X)
    transformer = model.get_ref("transformer")
    tokenizer = transformer.shims[0]._hfmodel.tokenizer
    if tokenizer is None:
        raise ValueError("The transformer is not loaded: initialize the pipeline (or load a saved one) first.")
    width = model.get_dim("nO")
    max_length, content_offset = _window_geometry(model, tokenizer)
    adapter = model.get_ref("lexicon_adapter") if model.has_ref("lexicon_adapter") else None
    plans = [_plan_doc(doc, tokenizer, max_length, adapter) for doc in docs]
    windows = [(d, window) for d, plan in enumerate(plans) for window in plan.windows]
    beta = model.attrs.get("entity_attention_scale", 0.0)
    if entity_ids is not None:
        check_gold(entity_ids, [len(doc) for doc in docs], "TransformerTok2Vec")
        if not (is_train and beta):
            entity_ids = None
    # Training runs all windows at once (one backward pass); prediction in chunks of
    # similar length, so a long doc needs only a chunk's hidden states at a time.
    if is_train:
        chunks = [list(range(len(windows)))] if windows else []
    else:
        by_length = sorted(range(len(windows)), key=lambda i: windows[i][1].end - windows[i][1].start)
        size = max(1, model.attrs["max_batch_windows"])
        chunks = [by_length[i : i + size] for i in range(0, len(by_length), size)]
    row_of_window = {}  # window index -> row of its first wordpiece in all_rows
    outputs, backprops = [], []
    offset = 0
    for chunk in chunks:
        items = [(plans[windows[i][0]], windows[i][1]) for i in chunk]
        batch = _window_batch(model, tokenizer, items, content_offset)
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
    gather, lengths = _token_rows(model, plans, windows, row_of_window)
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


def _encode(model: Model, batch: Dict[str, Any], is_train: bool) -> Tuple[Floats2d, Callable]:
    """Run one padded batch of windows; rows (batch * length, width) and their backprop."""
    transformer = model.get_ref("transformer")
    with _lexicon_hook(model, batch, is_train):
        layers, backprop_layers = _run_transformer(model, batch, is_train)
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
        if model.has_ref("lexicon_adapter"):
            adapter = torch_module(model.get_ref("lexicon_adapter"))
            _backward_unscaled(adapter, transformer.shims[0]._grad_scaler, lambda: backprop_layers(d_layers))
        else:
            backprop_layers(d_layers)

    return rows, backprop


def _run_transformer(model: Model, batch: Dict[str, Any], is_train: bool):
    """The transformer's hidden states (n_layers, batch, length, width) and their backprop."""
    transformer = model.get_ref("transformer")
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


@contextmanager
def _lexicon_hook(model: Model, batch: Dict[str, Any], is_train: bool):
    """With a lexicon adapter, replace the output of layer k by the adapter's while the transformer runs."""
    if not model.has_ref("lexicon_adapter"):
        yield
        return
    adapter = model.get_ref("lexicon_adapter")
    hf_model = model.get_ref("transformer").shims[0]._hfmodel.transformer
    module = _adapter_site(hf_model, model.attrs["lexicon_layer"])
    ids = batch["word_ids"]
    torch_module(adapter).train(is_train)

    def hook(module, args, output):
        if isinstance(output, tuple):
            return (fuse(adapter, output[0], ids),) + tuple(output[1:])
        return fuse(adapter, output, ids)

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _adapter_site(hf_model, layer: int) -> torch.nn.Module:
    """The module whose output the adapter replaces: the embeddings (0) or transformer layer `layer`."""
    name = type(hf_model).__name__
    if layer == 0:
        embeddings = getattr(hf_model, "embeddings", None)
        if not isinstance(embeddings, torch.nn.Module):
            raise ValueError(f"lexicon_layer 0 needs the model's embeddings module; {name} has no 'embeddings'.")
        return embeddings
    n_layers = hf_model.config.num_hidden_layers
    candidates = [getattr(getattr(hf_model, "encoder", None), "layer", None)]
    candidates += [m for m in hf_model.modules() if isinstance(m, torch.nn.ModuleList)]
    for layers in candidates:
        if isinstance(layers, torch.nn.ModuleList) and len(layers) == n_layers:
            return layers[layer - 1]
    raise ValueError(f"Found no list of {n_layers} transformer layers in {name} for the lexicon adapter.")


def _backward_unscaled(module: torch.nn.Module, scaler, run_backward: Callable[[], None]) -> None:
    """Run the transformer's backward pass; with mixed precision, unscale the module's new gradients.

    The transformer's grad scaler scales the gradients that flow into the adapter inside it,
    but unscales only the transformer's own parameters.
    """
    if not getattr(scaler, "_enabled", False):
        run_backward()
        return
    params = [p for p in module.parameters() if p.requires_grad]
    saved = [p.grad for p in params]
    for param in params:
        param.grad = None
    run_backward()
    scaler.unscale([p.grad for p in params if p.grad is not None])
    for param, grad in zip(params, saved):
        if grad is not None:
            param.grad = grad if param.grad is None else param.grad + grad


def _window_geometry(model: Model, tokenizer) -> Tuple[int, int]:
    """Most content wordpieces per window, and where the content starts after the special tokens."""
    config = model.get_ref("transformer").shims[0]._hfmodel.transformer.config
    limit = model.attrs["window_size"]
    if not limit:
        limit = min(tokenizer.model_max_length, getattr(config, "max_position_embeddings", 512))
    n_special = tokenizer.num_special_tokens_to_add(pair=False)
    if limit - n_special < 2:
        raise ValueError(
            f"Transformer window_size {limit} leaves {limit - n_special} wordpieces after the "
            f"{n_special} special tokens; use a window_size of at least {n_special + 2}."
        )
    probe = tokenizer.build_inputs_with_special_tokens([-1])
    return limit - n_special, probe.index(-1)


def _plan_doc(doc: Doc, tokenizer, max_length: int, adapter: Optional[Model] = None) -> DocPlan:
    """Tokenize a doc into wordpieces, align them to its tokens and split it into windows."""
    if not doc.text:
        empty = numpy.zeros((0,), dtype="i")
        return DocPlan([], [], empty, numpy.zeros((len(doc),), dtype="i"), [])
    encoding = tokenizer(
        doc.text,
        add_special_tokens=False,
        return_offsets_mapping=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=False,
        verbose=False,
    )
    offsets = encoding["offset_mapping"]
    char_to_token = [-1] * len(doc.text)
    for token in doc:
        char_to_token[token.idx : token.idx + len(token.text)] = [token.i] * len(token.text)
    token_wordpieces: List[List[int]] = [[] for _ in doc]
    wordpiece_tokens: List[int] = []
    for j, (start, end) in enumerate(offsets):
        # A wordpiece belongs to every token it overlaps (usually one character).
        overlapped = [t for t in sorted(set(char_to_token[start:end])) if t >= 0]
        for t in overlapped:
            token_wordpieces[t].append(j)
        wordpiece_tokens.append(overlapped[0] if overlapped else (wordpiece_tokens[-1] if wordpiece_tokens else 0))
    starts = numpy.asarray([start for start, _ in offsets], dtype="i")
    # A cut may go after a token that ends a sentence.
    sentence_ends = [
        int(numpy.searchsorted(starts, token.idx + len(token.text)))
        for token in doc
        if ends_sentence(token.text)
    ]
    windows = split_windows(sentence_ends, len(offsets), max_length)
    flat = [j for wordpieces in token_wordpieces for j in wordpieces]
    return DocPlan(
        list(encoding["input_ids"]),
        windows,
        numpy.asarray(flat, dtype="i"),
        numpy.asarray([len(w) for w in token_wordpieces], dtype="i"),
        wordpiece_tokens,
        None if adapter is None else word_ids(adapter, doc.text, offsets),
    )


def _window_batch(
    model: Model, tokenizer, items: List[Tuple[DocPlan, Window]], content_offset: int
) -> Dict[str, Any]:
    """Padded input_ids (n_windows, length) and attention_mask, with special tokens.

    The mask is (n_windows, length), or (n_windows, length, length) with an attention window.
    """
    sequences = [tokenizer.build_inputs_with_special_tokens(plan.input_ids[w.start : w.end]) for plan, w in items]
    n_steps = max(len(sequence) for sequence in sequences)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = numpy.full((len(sequences), n_steps), pad_id, dtype="int64")
    attention_mask = numpy.zeros((len(sequences), n_steps), dtype="int64")
    for i, sequence in enumerate(sequences):
        input_ids[i, : len(sequence)] = sequence
        attention_mask[i, : len(sequence)] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if model.has_ref("lexicon_adapter"):
        # shape: (n_windows, length, max_words_per_char); special tokens and padding get none
        cap = model.get_ref("lexicon_adapter").attrs["max_words_per_char"]
        ids = numpy.full((len(sequences), n_steps, cap), -1, dtype="int64")
        for i, (plan, w) in enumerate(items):
            ids[i, content_offset : content_offset + w.end - w.start] = plan.wordpiece_words[w.start : w.end]
        batch["word_ids"] = ids
    window = model.attrs.get("attention_window")
    if window is None:
        return batch
    # Token positions of every wordpiece; special tokens sit just outside the content.
    positions = numpy.zeros((len(sequences), n_steps), dtype="f")
    for i, ((plan, w), sequence) in enumerate(zip(items, sequences)):
        content = plan.wordpiece_tokens[w.start : w.end]
        end = content_offset + len(content)
        positions[i, :content_offset] = content[0] - 1
        positions[i, content_offset:end] = content
        positions[i, end : len(sequence)] = content[-1] + 1
    real = attention_mask == 1
    # shape: (n_windows, query, key)
    batch["attention_mask"] = (allowed_keys(positions, real, window) & real[:, None, :]).astype("int64")
    return batch


def _token_rows(model: Model, plans: List[DocPlan], windows, row_of_window) -> Tuple[Ints1d, Ints1d]:
    """For every token's wordpieces, the row of all_rows that holds it (read from its owning window)."""
    gathers = []
    window_index = 0
    for plan in plans:
        rows = numpy.zeros((len(plan.input_ids),), dtype="i")
        for window in plan.windows:
            first = row_of_window[window_index] - window.start
            rows[window.own_start : window.own_end] = first + numpy.arange(window.own_start, window.own_end)
            window_index += 1
        gathers.append(rows[plan.token_wordpieces])
    gather = numpy.concatenate(gathers) if gathers else numpy.zeros((0,), dtype="i")
    lengths = numpy.concatenate([plan.token_lengths for plan in plans]) if plans else numpy.zeros((0,), dtype="i")
    return model.ops.asarray1i(gather), model.ops.asarray1i(lengths)


def _convert_inputs(model: Model, batch: Dict[str, Any], is_train: bool) -> Tuple[ArgsKwargs, Callable]:
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


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
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
