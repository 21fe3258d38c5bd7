"""A bidirectional LSTM encoder over per-doc token vectors."""
from typing import Callable, List, Optional, Tuple

import torch
from thinc.api import ArgsKwargs, Model, registry, torch2xp
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ._torch import SizedModule, pad_batch, set_torch_module, torch_module, unpad_batch, wrap_sized

InT = List[Floats2d]
OutT = List[Floats2d]


@registry.layers("spacy-cner.BiLSTMEncoder.v1")
def BiLSTMEncoder(
    width: int, depth: int = 1, dropout: float = 0.0, nI: Optional[int] = None
) -> Model[InT, OutT]:
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
    return wrap_sized(
        "bilstm",
        BiLSTM(**hparams),
        _convert_inputs,
        _convert_outputs,
        init=init,
        forward=forward,
        dims={"nI": nI, "nO": width},
    )


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Infer nI from the data and build the LSTM."""
    if X is not None and not model.has_dim("nI"):
        model.set_dim("nI", X[0].shape[1])
    module = torch_module(model)
    if module.lstm is None:
        if not model.has_dim("nI"):
            raise ValueError("BiLSTMEncoder needs sample data or nI to initialize.")
        set_torch_module(model, BiLSTM(**{**module.hparams, "nI": model.get_dim("nI")}))


class BiLSTM(torch.nn.Module, SizedModule):
    """torch BiLSTM over padded batches that skips the padding (packed sequences)."""

    def __init__(self, nI: Optional[int], width: int, depth: int, dropout: float):
        super().__init__()
        self.hparams = {"nI": nI, "width": width, "depth": depth, "dropout": dropout}
        self.dropout = torch.nn.Dropout(dropout)
        self.register_buffer("_device_marker", torch.zeros(0), persistent=False)
        # A placeholder has no LSTM until init knows the input width.
        self.lstm: Optional[torch.nn.LSTM] = None
        if nI is not None:
            self.lstm = torch.nn.LSTM(
                nI,
                width // 2,
                num_layers=depth,
                dropout=dropout if depth > 1 else 0.0,
                bidirectional=True,
                batch_first=True,
            )

    @property
    def device(self) -> torch.device:
        return self._device_marker.device

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """inputs (batch, length, nI) -> outputs (batch, length, width); padding is zero."""
        packed = pack_padded_sequence(
            self.dropout(inputs), lengths, batch_first=True, enforce_sorted=False
        )
        outputs, _ = self.lstm(packed)
        # shape: (batch, length, width)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.shape[1])
        return self.dropout(outputs)


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Run the LSTM over the non-empty docs; empty docs get empty outputs."""
    width = model.get_dim("nO")
    nonempty = [i for i, x in enumerate(X) if len(x)]
    Y = [model.ops.alloc2f(0, width) for _ in X]
    if not nonempty:
        return Y, lambda dY: [model.ops.alloc2f(*x.shape) for x in X]
    Y_nonempty, backprop_nonempty = pytorch_forward(model, [X[i] for i in nonempty], is_train)
    for i, y in zip(nonempty, Y_nonempty):
        Y[i] = y

    def backprop(dY: OutT) -> InT:
        dX = [model.ops.alloc2f(*x.shape) for x in X]
        for i, dx in zip(nonempty, backprop_nonempty([dY[i] for i in nonempty])):
            dX[i] = dx
        return dX

    return Y, backprop


def _convert_inputs(model: Model, X: InT, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    device = torch_module(model).device
    inputs, _ = pad_batch(model, X, requires_grad=is_train, device=device)
    lengths = [len(x) for x in X]

    def backprop(d_inputs: ArgsKwargs) -> InT:
        return unpad_batch(torch2xp(d_inputs.args[0]), lengths)

    # pack_padded_sequence wants the lengths on the CPU.
    args = (inputs, torch.tensor(lengths, dtype=torch.int64))
    return ArgsKwargs(args=args, kwargs={}), backprop


def _convert_outputs(model: Model, X_Ytorch, is_train: bool) -> Tuple[OutT, Callable]:
    X, outputs = X_Ytorch
    lengths = [len(x) for x in X]

    def backprop(dY: OutT) -> ArgsKwargs:
        d_outputs, _ = pad_batch(model, dY, requires_grad=False, device=outputs.device)
        return ArgsKwargs(args=(outputs,), kwargs={"grad_tensors": d_outputs})

    return unpad_batch(torch2xp(outputs.detach()), lengths), backprop
