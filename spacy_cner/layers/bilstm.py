"""A bidirectional LSTM encoder over per-doc token vectors."""

from typing import Callable, List, Optional, Tuple

import torch
from thinc.api import ArgsKwargs, Model, registry, torch2xp
from thinc.types import Floats2d

from ._torch import Dropout, RebuildableModule, build_for_input_width, convert_padded_outputs, forward_by_length
from ._torch import pad_batch, torch_module, wrap_rebuildable

InT = List[Floats2d]
OutT = List[Floats2d]


@registry.layers("spacy-cner.BiLSTMEncoder.v1")
def BiLSTMEncoder(width: int, depth: int = 1, dropout: float = 0.0, nI: Optional[int] = None) -> Model[InT, OutT]:
    """Contextualise token vectors with a stacked bidirectional LSTM.

    width (int): Output width; each direction has width // 2 hidden units.
    depth (int): Number of stacked BiLSTM layers.
    dropout (float): Dropout on the input, between layers and on the output.
    nI (Optional[int]): Input width; None infers it from the data at initialize.
    RETURNS (Model[List[Floats2d], List[Floats2d]]): The encoder.
    """
    if width % 2 or width <= 0:
        raise ValueError(f"BiLSTMEncoder width must be a positive even number, got {width}.")
    hparams = {"nI": nI, "width": width, "depth": depth, "dropout": dropout}
    return wrap_rebuildable(
        "bilstm",
        BiLSTM(**hparams),
        _convert_inputs,
        convert_padded_outputs,
        init=init,
        forward=forward,
        dims={"nI": nI, "nO": width},
    )


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Infer nI from the data and build the LSTM."""
    build_for_input_width(model, X, "BiLSTMEncoder")


class BiLSTM(torch.nn.Module, RebuildableModule):
    """torch BiLSTM over zero-padded batches that never reads the padding.

    Each direction is a unidirectional LSTM over the padded batch; the backward
    one reads every sequence reversed within its own length, so padding only
    ever follows the real tokens. On CPUs this is faster than packed sequences,
    and it gives the same outputs.
    """

    def __init__(self, nI: Optional[int], width: int, depth: int, dropout: float):
        super().__init__()
        self.hparams = {"nI": nI, "width": width, "depth": depth, "dropout": dropout}
        self.dropout = Dropout(dropout)
        self.register_buffer("_device_marker", torch.zeros(0), persistent=False)
        # A placeholder has no LSTMs until init knows the input width.
        self.forward_lstms = torch.nn.ModuleList()
        self.backward_lstms = torch.nn.ModuleList()
        if nI is not None:
            for layer in range(depth):
                layer_nI = nI if layer == 0 else width
                self.forward_lstms.append(torch.nn.LSTM(layer_nI, width // 2, batch_first=True))
                self.backward_lstms.append(torch.nn.LSTM(layer_nI, width // 2, batch_first=True))

    @property
    def is_built(self) -> bool:
        return len(self.forward_lstms) > 0

    @property
    def device(self) -> torch.device:
        return self._device_marker.device

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """inputs (batch, length, nI) -> outputs (batch, length, width); padding is zero."""
        n_steps = inputs.shape[1]
        steps = torch.arange(n_steps, device=inputs.device).unsqueeze(0)
        lengths = lengths.to(inputs.device).unsqueeze(1)
        # shape: (batch, length); position t reads position length - 1 - t
        reverse = torch.where(steps < lengths, lengths - 1 - steps, steps)
        is_real = (steps < lengths).unsqueeze(2).to(inputs.dtype)
        hidden = inputs
        for forward_lstm, backward_lstm in zip(self.forward_lstms, self.backward_lstms):
            hidden = self.dropout(hidden)
            forward_out, _ = forward_lstm(hidden)
            backward_out, _ = backward_lstm(_gather_steps(hidden, reverse))
            # shape: (batch, length, width)
            hidden = torch.cat([forward_out, _gather_steps(backward_out, reverse)], dim=2) * is_real
        return self.dropout(hidden)


def _gather_steps(values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """values[b, order[b, t]] for every b, t; shape (batch, length, width)."""
    return values.gather(1, order.unsqueeze(2).expand(-1, -1, values.shape[2]))


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Run the LSTM over groups of similar-length docs; empty docs get empty outputs."""
    return forward_by_length(model, X, is_train)


def _convert_inputs(model: Model, X: InT, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    device = torch_module(model).device
    inputs, _ = pad_batch(model, X, requires_grad=is_train, device=device)
    lengths = [len(x) for x in X]

    def backprop(d_inputs: ArgsKwargs) -> InT:
        return model.ops.unpad(torch2xp(d_inputs.args[0]), lengths)

    args = (inputs, torch.tensor(lengths, dtype=torch.int64))
    return ArgsKwargs(args=args, kwargs={}), backprop
