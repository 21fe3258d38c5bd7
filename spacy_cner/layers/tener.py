"""TENER: a Transformer encoder adapted for NER (Yan et al. 2019, arXiv:1911.04474).

Two changes make the Transformer work for NER: attention scores carry a relative
position encoding that knows direction as well as distance (eq. 18), and they are
not scaled by 1/sqrt(d_k), which keeps the attention sharp (section 3.2.2).
"""

import math
from typing import Callable, List, Optional, Tuple, Union

import torch
from thinc.api import ArgsKwargs, Model, registry, torch2xp, xp2torch
from thinc.types import Floats2d, Ints1d

from .attention_window import allowed_keys, check_window
from .entity_attention import check_gold, check_scale, entity_scale, with_gold
from ..long_docs import split_windows
from ._torch import (
    Dropout,
    RebuildableModule,
    build_for_input_width,
    convert_padded_outputs,
    forward_by_length,
    pad_batch,
    torch_module,
    wrap_rebuildable,
)


# The docs' vectors, or (vectors, gold entity ids per doc) in crf_ner's update (entity_attention).
InT = Union[List[Floats2d], Tuple[List[Floats2d], List[Ints1d]]]
OutT = List[Floats2d]


@registry.layers("spacy-cner.TENEREncoder.v1")
def TENEREncoder(
    n_heads: int = 4,
    head_width: int = 64,
    depth: int = 2,
    ffn_width: Optional[int] = None,
    dropout: float = 0.15,
    attention_dropout: float = 0.15,
    output_dropout: float = 0.4,
    scale_attention: bool = False,
    key_projection: bool = False,
    max_length: int = 512,
    attention_window: Optional[int] = None,
    entity_attention_scale: float = 0.0,
    nI: Optional[int] = None,
) -> Model[InT, OutT]:
    """Contextualise token vectors with TENER's relative-position Transformer layers.

    The input is projected to n_heads * head_width, then runs through `depth`
    post-norm layers of relative self-attention and a feed-forward network. In
    training, the input may be (vectors, gold entity ids per doc), which an
    entity_attention_scale reads (spacy_cner.layers.entity_attention); prediction ignores them.

    n_heads (int): Attention heads per layer.
    head_width (int): Width of each head (even); the model width is n_heads * head_width.
    depth (int): Number of Transformer layers.
    ffn_width (Optional[int]): Hidden width of the feed-forward networks; None is 2 x the model width.
    dropout (float): Dropout inside the feed-forward networks.
    attention_dropout (float): Dropout on the attention probabilities.
    output_dropout (float): Dropout on the encoder's output (TENER's fc_dropout).
    scale_attention (bool): Divide the scores by sqrt(head_width), as the vanilla Transformer does.
    key_projection (bool): Project the keys; TENER uses the input itself as the keys.
    max_length (int): Longer docs are encoded in overlapping windows of this many tokens,
        each token read from the window where it is farthest from an edge, so that
        attention memory stays bounded (it grows with the square of the length).
    attention_window (Optional[int]): Sliding-window constraint (Wang, Wang and Shen 2024,
        eq. 18): a token attends only to tokens at most this far away, in training and
        prediction; None attends to the whole doc.
    entity_attention_scale (float): Entity-label enhancement, beta of Wang, Wang and Shen
        2024 (eqs. 15-16): in training, the scores between tokens of the same gold entity
        are multiplied by 1 + beta (crf_ner provides the gold entities); 0 turns it off.
        Prediction is unchanged.
    nI (Optional[int]): Input width; None infers it from the data at initialize.
    RETURNS (Model[InT, List[Floats2d]]): The encoder.
    """
    if head_width <= 0 or head_width % 2:
        raise ValueError(
            f"TENEREncoder head_width must be a positive even number (sine and cosine halves), got {head_width}."
        )
    if n_heads <= 0 or depth <= 0:
        raise ValueError(f"TENEREncoder needs n_heads >= 1 and depth >= 1, got {n_heads} and {depth}.")
    if max_length < 2:
        raise ValueError(f"TENEREncoder max_length must be at least 2, got {max_length}.")
    check_window(attention_window, "TENEREncoder")
    check_scale(entity_attention_scale, "TENEREncoder")
    width = n_heads * head_width
    module = TENER(
        nI=nI,
        n_heads=n_heads,
        head_width=head_width,
        depth=depth,
        ffn_width=ffn_width if ffn_width is not None else 2 * width,
        dropout=dropout,
        attention_dropout=attention_dropout,
        output_dropout=output_dropout,
        scale_attention=scale_attention,
        key_projection=key_projection,
        attention_window=attention_window,
    )
    model = wrap_rebuildable(
        "tener",
        module,
        _convert_inputs,
        convert_padded_outputs,
        init=init,
        forward=forward,
        dims={"nI": nI, "nO": width},
    )
    model.attrs["max_length"] = max_length
    model.attrs["entity_attention_scale"] = entity_attention_scale
    return model


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Encode groups of similar-length docs (long ones in windows); empty docs get empty outputs."""
    arrays, entity_ids = with_gold(X)
    lengths = [len(array) for array in arrays]
    beta = model.attrs.get("entity_attention_scale", 0.0)
    scales = None
    if entity_ids is not None:
        check_gold(entity_ids, lengths, "TENEREncoder")
        if is_train and beta:
            scales = [model.ops.asarray2f(entity_scale(ids, beta)) for ids in entity_ids]
    max_length = model.attrs["max_length"]
    if all(len(array) <= max_length for array in arrays):
        Y, backprop_arrays = forward_by_length(model, arrays, is_train, side_inputs=scales)
    else:
        Y, backprop_arrays = _forward_windows(model, arrays, scales, max_length, is_train)
    if entity_ids is None:
        return Y, backprop_arrays

    def backprop(dY: OutT) -> Tuple[List[Floats2d], List[Ints1d]]:
        return backprop_arrays(dY), entity_ids

    return Y, backprop


def _forward_windows(model: Model, arrays: List[Floats2d], scales, max_length: int, is_train: bool):
    """Encode docs longer than max_length as overlapping windows and stitch the outputs."""
    pieces = [(i, window) for i, array in enumerate(arrays) for window in split_windows([], len(array), max_length)]
    piece_arrays = [arrays[i][w.start : w.end] for i, w in pieces]
    piece_scales = None if scales is None else [scales[i][w.start : w.end, w.start : w.end] for i, w in pieces]
    Y_pieces, backprop_pieces = forward_by_length(model, piece_arrays, is_train, side_inputs=piece_scales)
    width = model.get_dim("nO")
    Y = [model.ops.alloc2f(len(array), width) for array in arrays]
    for (i, w), y in zip(pieces, Y_pieces):
        Y[i][w.own_start : w.own_end] = y[w.own_start - w.start : w.own_end - w.start]

    def backprop(dY: OutT) -> List[Floats2d]:
        d_pieces = [model.ops.alloc2f(*y.shape) for y in Y_pieces]
        for (i, w), d_piece in zip(pieces, d_pieces):
            d_piece[w.own_start - w.start : w.own_end - w.start] = dY[i][w.own_start : w.own_end]
        dX = [model.ops.alloc2f(*array.shape) for array in arrays]
        for (i, w), dx in zip(pieces, backprop_pieces(d_pieces)):
            dX[i][w.start : w.end] += dx
        return dX

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Infer nI from the data and build the layers."""
    build_for_input_width(model, with_gold(X)[0] if X is not None else None, "TENEREncoder")


class TENER(torch.nn.Module, RebuildableModule):
    """Input projection, then post-norm Transformer layers with relative attention."""

    def __init__(
        self,
        nI: Optional[int],
        n_heads: int,
        head_width: int,
        depth: int,
        ffn_width: int,
        dropout: float,
        attention_dropout: float,
        output_dropout: float,
        scale_attention: bool,
        key_projection: bool,
        attention_window: Optional[int] = None,
    ):
        super().__init__()
        self.attention_window = attention_window
        self.hparams = {
            "nI": nI,
            "n_heads": n_heads,
            "head_width": head_width,
            "depth": depth,
            "ffn_width": ffn_width,
            "dropout": dropout,
            "attention_dropout": attention_dropout,
            "output_dropout": output_dropout,
            "scale_attention": scale_attention,
            "key_projection": key_projection,
            "attention_window": attention_window,
        }
        width = n_heads * head_width
        self.register_buffer("_device_marker", torch.zeros(0), persistent=False)
        self.output_dropout = Dropout(output_dropout)
        # A placeholder has no weights until init knows the input width.
        self.input_layer = torch.nn.Linear(nI, width) if nI is not None else None
        self.layers = torch.nn.ModuleList()
        if nI is not None:
            for _ in range(depth):
                attention = RelativeSelfAttention(
                    n_heads, head_width, attention_dropout, scale_attention, key_projection
                )
                self.layers.append(TENERLayer(attention, ffn_width, dropout))

    @property
    def is_built(self) -> bool:
        return self.input_layer is not None

    @property
    def device(self) -> torch.device:
        return self._device_marker.device

    def forward(
        self, inputs: torch.Tensor, mask: torch.Tensor, attention_scale: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """inputs (batch, length, nI), mask (batch, length) bool -> (batch, length, width).

        attention_scale: optional (batch, length, length) factors of the attention scores
        (entity_attention). Padding positions of the output are zero.
        """
        attention_bias = None
        if self.attention_window is not None:
            steps = torch.arange(inputs.shape[1], device=inputs.device).expand(mask.shape)
            blocked = ~allowed_keys(steps, mask, self.attention_window)
            attention_bias = torch.zeros(blocked.shape, dtype=inputs.dtype, device=inputs.device)
            attention_bias = attention_bias.masked_fill(blocked, float("-inf"))
        hidden = self.input_layer(inputs)
        for layer in self.layers:
            hidden = layer(hidden, mask, attention_bias, attention_scale)
        return self.output_dropout(hidden) * mask.unsqueeze(2).to(hidden.dtype)


class TENERLayer(torch.nn.Module):
    """Relative self-attention and a feed-forward network, each with residual and layer norm."""

    def __init__(self, attention: "RelativeSelfAttention", ffn_width: int, dropout: float):
        super().__init__()
        width = attention.n_heads * attention.head_width
        self.attention = attention
        self.attention_norm = torch.nn.LayerNorm(width)
        # TENER's reference code uses LeakyReLU in the feed-forward network.
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(width, ffn_width),
            torch.nn.LeakyReLU(),
            Dropout(dropout),
            torch.nn.Linear(ffn_width, width),
            Dropout(dropout),
        )
        self.feed_forward_norm = torch.nn.LayerNorm(width)

    def forward(self, hidden: torch.Tensor, *attention_args: Optional[torch.Tensor]) -> torch.Tensor:
        """hidden (batch, length, width) -> (batch, length, width); attention_args: the mask, bias
        and scale that RelativeSelfAttention.forward takes after the hidden states."""
        hidden = self.attention_norm(hidden + self.attention(hidden, *attention_args))
        return self.feed_forward_norm(hidden + self.feed_forward(hidden))


class RelativeSelfAttention(torch.nn.Module):
    """Multi-head self-attention with TENER's direction- and distance-aware scores (eq. 18)."""

    def __init__(
        self,
        n_heads: int,
        head_width: int,
        attention_dropout: float = 0.0,
        scale_attention: bool = False,
        key_projection: bool = False,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.head_width = head_width
        self.scale_attention = scale_attention
        width = n_heads * head_width
        # Queries and values are projected, keys are the input itself (TENER section 3.2.2).
        self.query_value = torch.nn.Linear(width, 2 * width, bias=False)
        self.key = torch.nn.Linear(width, width, bias=False) if key_projection else None
        # u and v of eq. 18: per-head biases towards content and towards relative positions.
        self.u = torch.nn.Parameter(torch.empty(n_heads, head_width))
        self.v = torch.nn.Parameter(torch.empty(n_heads, head_width))
        torch.nn.init.xavier_normal_(self.u)
        torch.nn.init.xavier_normal_(self.v)
        self.dropout = Dropout(attention_dropout)

    def forward(
        self,
        hidden: torch.Tensor,
        mask: torch.Tensor,
        attention_bias: Optional[torch.Tensor] = None,
        attention_scale: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """hidden (batch, length, width), mask (batch, length) -> (batch, length, width)."""
        batch_size, length, width = hidden.shape
        query, key, value = self._project(hidden)
        scores = self._scores(query, key)
        if attention_scale is not None:
            scores = scores * attention_scale.unsqueeze(1)
        if attention_bias is not None:
            scores = scores + attention_bias.unsqueeze(1)
        # shape: (batch, heads, length, length); padding keys get no attention
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        # shape: (batch, heads, length, head_width) -> (batch, length, width)
        attended = torch.matmul(weights, value)
        return attended.transpose(1, 2).reshape(batch_size, length, width)

    def attention_scores(self, hidden: torch.Tensor) -> torch.Tensor:
        """The raw scores of eq. 18 (scaled if configured), shape (batch, heads, query, key)."""
        query, key, _ = self._project(hidden)
        return self._scores(query, key)

    def _project(self, hidden: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values, each (batch, heads, length, head_width)."""
        batch_size, length, _ = hidden.shape
        query, value = self.query_value(hidden).chunk(2, dim=-1)
        key = self.key(hidden) if self.key is not None else hidden

        def split_heads(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.view(batch_size, length, self.n_heads, self.head_width).transpose(1, 2)

        return split_heads(query), split_heads(key), split_heads(value)

    def _scores(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """TENER eq. 18: Q_t K_j + Q_t R_{t-j} + u K_j + v R_{t-j}, for every query t and key j."""
        length = query.shape[2]
        u = self.u[None, :, None, :]
        v = self.v[None, :, None, :]
        # shape: (batch, heads, query, key)
        content = torch.matmul(query + u, key.transpose(2, 3))
        # R for every offset -(length - 1) .. length - 1, shape: (2 * length - 1, head_width)
        encoding = relative_encoding(length, self.head_width, query.device, query.dtype)
        # shape: (batch, heads, query, offset)
        by_offset = torch.matmul(query + v, encoding.transpose(0, 1))
        steps = torch.arange(length, device=query.device)
        # shape: (query, key); row t, column j holds the offset t - j, moved to index from 0
        offset_index = steps.unsqueeze(1) - steps.unsqueeze(0) + length - 1
        position = by_offset.gather(3, offset_index.expand(*by_offset.shape[:2], length, length))
        scores = content + position
        if self.scale_attention:
            scores = scores / math.sqrt(self.head_width)
        return scores


def relative_encoding(length: int, width: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """R_k of TENER eq. 17 for the offsets k = -(length - 1) .. length - 1.

    R_k = [sin(k w_0) .. sin(k w_{d/2-1}), cos(k w_0) .. cos(k w_{d/2-1})] with
    w_i = 10000^(-2i/d). The sine half is odd in k, so R_k and R_-k differ:
    the scores can tell a left neighbour from a right one.
    RETURNS (torch.Tensor): shape (2 * length - 1, width); row m is offset m - (length - 1).
    """
    half = width // 2
    frequencies = torch.exp(torch.arange(half, device=device, dtype=torch.float32) * (-2.0 * math.log(10000.0) / width))
    offsets = torch.arange(-(length - 1), length, device=device, dtype=torch.float32)
    angles = offsets.unsqueeze(1) * frequencies.unsqueeze(0)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).to(dtype)


def _convert_inputs(model: Model, X, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """Pad one group: X is the docs' arrays, or (arrays, attention scale per doc)."""
    arrays, scales = X if isinstance(X, tuple) else (X, None)
    device = torch_module(model).device
    inputs, mask = pad_batch(model, arrays, requires_grad=is_train, device=device)
    kwargs = {}
    if scales is not None:
        kwargs["attention_scale"] = _pad_squares(model, scales, inputs.shape[1], 1.0, device)
    lengths = [len(array) for array in arrays]

    def backprop(d_inputs: ArgsKwargs) -> List[Floats2d]:
        return model.ops.unpad(torch2xp(d_inputs.args[0]), lengths)

    return ArgsKwargs(args=(inputs, mask), kwargs=kwargs), backprop


def _pad_squares(model: Model, squares: List[Floats2d], length: int, fill: float, device) -> torch.Tensor:
    """Stack (n, n) arrays into a (batch, length, length) tensor filled with `fill` elsewhere
    (thinc's Ops.pad pads the first axis only, with zeros)."""
    padded = model.ops.alloc3f(len(squares), length, length)
    padded += fill
    for i, square in enumerate(squares):
        padded[i, : len(square), : len(square)] = square
    return xp2torch(padded, device=device)
