"""Helpers shared by the torch-backed layers: rebuildable modules and padding."""
import os
from io import BytesIO
from typing import Any, Callable, Dict, List, Optional, Tuple

import srsly
import torch
from thinc.api import Model, PyTorchShim, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d

# torch's thread pool does not survive fork(): a forked worker (nlp.pipe with
# n_process > 1) that runs a multi-threaded op hangs. One thread per worker.
os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))


class SizedModule:
    """Mixin for a torch module that records its JSON-safe constructor arguments.

    Layers whose sizes are only known at `initialize` build a placeholder at
    construction and swap in the real module in `init`. Saving the arguments
    next to the weights lets `from_bytes` rebuild the real module, so a saved
    pipeline loads without a second `initialize`. Subclasses set `self.hparams`
    to the keyword arguments that rebuild them.
    """

    hparams: Dict[str, Any]


def serialize_sized(module: SizedModule) -> bytes:
    """Serialize a SizedModule's constructor arguments and weights."""
    filelike = BytesIO()
    torch.save(module.state_dict(), filelike)
    return srsly.msgpack_dumps({"hparams": module.hparams, "state": filelike.getvalue()})


def deserialize_sized(module: SizedModule, data: bytes, device: "torch.device") -> SizedModule:
    """Rebuild a SizedModule of the same class from serialize_sized's bytes."""
    msg = srsly.msgpack_loads(data)
    rebuilt = type(module)(**msg["hparams"])
    state = torch.load(BytesIO(msg["state"]), map_location=device)
    rebuilt.load_state_dict(state)
    return rebuilt.to(device)


def wrap_sized(
    name: str,
    module: SizedModule,
    convert_inputs: Callable,
    convert_outputs: Callable,
    *,
    init: Optional[Callable] = None,
    forward: Callable = pytorch_forward,
    dims: Optional[Dict[str, Optional[int]]] = None,
    mixed_precision: bool = False,
) -> Model:
    """A thinc layer around a SizedModule, as PyTorchWrapper_v3 builds one.

    forward defaults to PyTorchWrapper's: convert_inputs, the module, convert_outputs.
    """
    shim = PyTorchShim(
        module,
        mixed_precision=mixed_precision,
        serialize_model=serialize_sized,
        deserialize_model=deserialize_sized,
    )
    return Model(
        name,
        forward,
        init=init,
        dims=dims or {},
        attrs={"convert_inputs": convert_inputs, "convert_outputs": convert_outputs},
        shims=[shim],
    )


def torch_module(model: Model) -> SizedModule:
    """The torch module inside a wrapped layer."""
    return model.shims[0]._model


def set_torch_module(model: Model, module: SizedModule) -> None:
    """Replace the torch module inside a wrapped layer (from its init)."""
    shim = model.shims[0]
    shim._model = module.to(shim.device)


def pad_batch(
    model: Model, arrays: List[Floats2d], *, requires_grad: bool, device: Any = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stack (length, width) arrays into a zero-padded (batch, max_len, width) tensor.

    RETURNS (Tuple[Tensor, Tensor]): The padded tensor and a bool mask (batch, max_len).
    """
    lengths = [len(array) for array in arrays]
    width = arrays[0].shape[1]
    padded = model.ops.alloc3f(len(arrays), max(lengths), width)
    for i, array in enumerate(arrays):
        padded[i, : len(array)] = array
    mask = model.ops.alloc2f(len(arrays), max(lengths))
    for i, length in enumerate(lengths):
        mask[i, :length] = 1
    tensor = xp2torch(padded, requires_grad=requires_grad, device=device)
    return tensor, xp2torch(mask, device=device).bool()


def unpad_batch(padded: Any, lengths: List[int]) -> List[Any]:
    """Split a (batch, max_len, ...) array into per-item (length, ...) arrays."""
    return [padded[i, :length] for i, length in enumerate(lengths)]
