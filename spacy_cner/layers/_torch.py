"""Helpers shared by the torch-backed layers: rebuildable modules and padding."""

import contextlib
import os
import pickle
from io import BytesIO
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy
import srsly
import torch
from torch.nn.utils import parametrize
from thinc.api import ArgsKwargs, Model, PyTorchShim, torch2xp, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d

from ..backends.precision import autocast_module, bfloat16_products, to_float32

# Docs per call of a wrapped layer (LSTM, attention, adapter); groups of similar length keep the padding small.
GROUP_SIZE = 16

# torch's thread pool does not survive fork(): a forked worker (nlp.pipe with
# n_process > 1) that runs a multi-threaded op hangs. One thread per worker.
os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))


class Dropout(torch.nn.Dropout):
    """torch.nn.Dropout whose mask, on the CPU in training, comes from numpy.

    Why not torch's own: its CPU dropout draws a Bernoulli per element, an order of magnitude
    slower than numpy's PCG64 gives random bytes, and the default config's BiLSTM dropout took a
    visible share of a training step (BENCHMARKS.md#training). The
    same distribution: each element kept with probability 1 - p and scaled by 1 / (1 - p)
    (exactly for p a multiple of 1/256, such as 0.5; to 2^-24 otherwise). Each call seeds its
    generator from torch's, so that spaCy's fix_random_seed still makes a training run
    reproducible. Other devices, evaluation, in-place dropout and p of 0 or 1 are torch's own.
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or input.device.type != "cpu" or self.inplace or not 0.0 < self.p < 1.0:
            return super().forward(input)
        rng = numpy.random.Generator(numpy.random.PCG64(int(torch.randint(0, 2**62, (1,)))))
        levels = self.p * 256
        if levels == int(levels):
            keep = rng.integers(0, 256, size=input.shape, dtype=numpy.uint8) >= int(levels)
        else:
            keep = rng.random(size=input.shape, dtype=numpy.float32) >= self.p
        mask = numpy.multiply(keep, 1.0 / (1.0 - self.p), dtype=numpy.float32)
        return input * torch.from_numpy(mask).to(input.dtype)


class RebuildableModule:
    """Mixin for a torch module that records its JSON-safe constructor arguments.

    Layers whose sizes are only known at `initialize` build a placeholder at
    construction and swap in the real module in `init`. Saving the arguments
    next to the weights lets `from_bytes` rebuild the real module, so a saved
    pipeline loads without a second `initialize`. Subclasses set `self.hparams`
    to the keyword arguments that rebuild them.
    """

    hparams: Dict[str, Any]

    def __reduce_ex__(self, protocol):
        """Pickle as the constructor arguments and the weights (as serialize_rebuildable saves them).

        torch refuses to pickle a module with parametrizations (the CRF's transition
        masks), and a pipeline must pickle for nlp.pipe(n_process=2) under spawn.
        """
        cls = parametrize.type_before_parametrizations(self)
        return (_rebuild, (cls, self.hparams, self.state_dict(), self.training))


def _rebuild(cls: type, hparams: Dict[str, Any], state: Dict[str, Any], training: bool) -> RebuildableModule:
    module = cls(**hparams)
    module.load_state_dict(state)
    return module.train(training)


def serialize_rebuildable(module: RebuildableModule) -> bytes:
    """Serialize a RebuildableModule's constructor arguments and weights."""
    filelike = BytesIO()
    torch.save(module.state_dict(), filelike)
    return srsly.msgpack_dumps({"hparams": module.hparams, "state": filelike.getvalue()})


def deserialize_rebuildable(module: RebuildableModule, data: bytes, device: "torch.device") -> RebuildableModule:
    """Rebuild a RebuildableModule of the same class from serialize_rebuildable's bytes."""
    msg = srsly.msgpack_loads(data)
    # A module with parametrizations (the CRF's masks) has a generated subclass as its type: build
    # the class it came from, or loading into an already loaded pipeline registers them twice.
    rebuilt = parametrize.type_before_parametrizations(module)(**msg["hparams"])
    rebuilt.load_state_dict(load_weights(msg["state"], device))
    return rebuilt.to(device)


def load_weights(data: bytes, device: "torch.device") -> Dict[str, Any]:
    """A state dict saved with torch.save, loaded with weights_only=True.

    A saved pipeline is a file anyone could have edited: torch.load's default runs the
    code a pickle names (torch < 2.6, or any torch with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1);
    here anything but tensors and plain containers is refused.
    """
    try:
        return torch.load(BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        raise pickle.UnpicklingError(
            "Refused to load saved weights that hold more than tensors (a tampered pipeline, "
            f"or one not saved by spacy-cner): {error}"
        ) from error


def finish_update_in_place(shim: PyTorchShim, optimizer: Any) -> None:
    """thinc's PyTorchShim.finish_update, but writing the new weights into the parameters.

    thinc's version replaces each parameter's .data with a tensor made from the
    optimizer's array (through DLPack); on CPU every step then keeps memory of about
    half the parameters' size alive (seen with torch 2.13: the process grew at every step,
    without bound).
    """
    for name, param in shim._model.named_parameters():
        if param.grad is None:
            continue
        if not shim._grad_scaler.found_inf:  # no update when a gradient overflowed
            weights, _ = optimizer((shim.id, name), torch2xp(param.data), torch2xp(param.grad))
            new = xp2torch(weights, device=param.device)
            if new.data_ptr() != param.data.data_ptr():
                with torch.no_grad():
                    param.data.copy_(new)
        param.grad.zero_()
    shim._grad_scaler.update()


@contextlib.contextmanager
def use_params_in_place(shim: PyTorchShim, params: Dict[Any, Any]):
    """thinc's PyTorchShim.use_params, reading the keys the optimizer writes.

    The optimizer keeps a shim's weights (and, with use_averages, their averages) under
    (shim.id, parameter name), as finish_update names them, but thinc's use_params looks
    for "pytorch_<id>_<name>" keys, finds none and leaves the weights as they are: spaCy's
    training loop evaluates and saves with nlp.use_params(optimizer.averages), so every
    torch layer (BiLSTM, TENER, CRF, transformer) silently ignored use_averages = true.
    """
    swapped = []  # (parameter, its own weights)
    with torch.no_grad():
        for name, param in shim._model.named_parameters():
            if (shim.id, name) in params:
                swapped.append((param, param.detach().clone()))
                param.copy_(xp2torch(params[(shim.id, name)], device=param.device))
    try:
        yield
    finally:
        with torch.no_grad():
            for param, own in swapped:
                param.copy_(own)


def predict_in_eval_mode(shim: PyTorchShim, inputs: ArgsKwargs) -> Any:
    """thinc's PyTorchShim.predict, but the module stays in evaluation mode afterwards.

    Why: thinc's predict sets eval(), runs, then sets train() on the module every call, and a module
    has one mode for all threads: a pipeline used from several threads at once (a web server's)
    ran some docs in training mode, dropout on (different entities for 9-12 of 244 docs with 4
    threads). Here predict only ever sets eval(); begin_update sets train() when training resumes.
    Inside backends.precision.inference_precision("bfloat16") a module on the CPU predicts under
    torch's bfloat16 autocast, its outputs back in float32.
    """
    if shim._model.training:
        shim._model.eval()
    with torch.no_grad():
        # On the CPU inside inference_precision("bfloat16") (crf_ner's precision): bfloat16 products.
        with torch.autocast(device_type="cuda", enabled=shim._mixed_precision), autocast_module(shim.device):
            outputs = shim._model(*inputs.args, **inputs.kwargs)
    return to_float32(outputs) if bfloat16_products() else outputs


class InPlacePyTorchShim(PyTorchShim):
    """A PyTorchShim whose finish_update does not leak memory (finish_update_in_place), whose
    use_params reads the optimizer's averages (use_params_in_place) and whose predict leaves
    the module in evaluation mode (predict_in_eval_mode: thread-safe)."""

    def predict(self, inputs: ArgsKwargs) -> Any:
        return predict_in_eval_mode(self, inputs)

    def finish_update(self, optimizer: Any) -> None:
        finish_update_in_place(self, optimizer)

    def use_params(self, params: Dict[Any, Any]):
        return use_params_in_place(self, params)


def wrap_rebuildable(
    name: str,
    module: RebuildableModule,
    convert_inputs: Callable,
    convert_outputs: Callable,
    *,
    init: Optional[Callable] = None,
    forward: Callable = pytorch_forward,
    dims: Optional[Dict[str, Optional[int]]] = None,
    mixed_precision: bool = False,
) -> Model:
    """A thinc layer around a RebuildableModule, as PyTorchWrapper_v3 builds one.

    forward defaults to PyTorchWrapper's: convert_inputs, the module, convert_outputs.
    """
    shim = InPlacePyTorchShim(
        module,
        mixed_precision=mixed_precision,
        serialize_model=serialize_rebuildable,
        deserialize_model=deserialize_rebuildable,
    )
    return Model(
        name,
        forward,
        init=init,
        dims=dims or {},
        attrs={"convert_inputs": convert_inputs, "convert_outputs": convert_outputs},
        shims=[shim],
    )


def torch_module(model: Model) -> RebuildableModule:
    """The torch module inside a wrapped layer."""
    return model.shims[0]._model


def set_torch_module(model: Model, module: RebuildableModule) -> None:
    """Replace the torch module inside a wrapped layer (from its init)."""
    shim = model.shims[0]
    shim._model = module.to(shim.device)


def build_for_input_width(model: Model, arrays: Optional[List[Floats2d]], layer_name: str) -> None:
    """Set nI from sample arrays (unless set) and build the placeholder module with it."""
    if arrays is not None and not model.has_dim("nI"):
        model.set_dim("nI", arrays[0].shape[1])
    module = torch_module(model)
    if not module.is_built:
        if not model.has_dim("nI"):
            raise ValueError(f"{layer_name} needs sample data or nI to initialize.")
        set_torch_module(model, type(module)(**{**module.hparams, "nI": model.get_dim("nI")}))


def pad_batch(
    model: Model, arrays: List[Floats2d], *, requires_grad: bool, device: Any = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stack (length, width) arrays into a zero-padded (batch, max_len, width) tensor (thinc's
    Ops.pad), with a bool mask (batch, max_len) of the real rows, both on the given device.

    RETURNS (Tuple[Tensor, Tensor]): The padded tensor and the mask.
    """
    xp = model.ops.xp
    padded = model.ops.pad([model.ops.asarray2f(array) for array in arrays])
    lengths = xp.asarray([len(array) for array in arrays])
    mask = (xp.arange(padded.shape[1])[None, :] < lengths[:, None]).astype("float32")
    tensor = xp2torch(padded, requires_grad=requires_grad, device=device)
    return tensor, xp2torch(mask, device=device).bool()


def forward_by_length(
    model: Model,
    X: List[Floats2d],
    is_train: bool,
    *,
    group_size: int = GROUP_SIZE,
    side_inputs: Optional[Sequence[Any]] = None,
) -> Tuple[List[Floats2d], Callable]:
    """Run a wrapped layer over groups of similar-length docs; empty docs get empty outputs.

    Docs are sorted by length and run up to group_size at a time, the longest of a
    group at most twice the shortest, so that short docs are not padded to the
    longest doc of the whole batch (over half of a random
    batch of Resume sentences would be padding). With side_inputs (one item per doc,
    e.g. lexicon word ids), each group's input is (arrays, side inputs of those docs);
    side inputs get no gradient.

    RETURNS (Tuple[List[Floats2d], Callable]): Outputs of width nO and the backprop
        callback, which returns the inputs' gradients.
    """
    width = model.get_dim("nO")
    Y = [model.ops.alloc2f(0, width) for _ in X]
    by_length = sorted((i for i, x in enumerate(X) if len(x)), key=lambda i: len(X[i]))
    groups: List[List[int]] = []
    for i in by_length:
        # A new group when full, or when this doc would more than double the padded length
        # (e.g. short sentences batched with a long doc's 512-token windows).
        if groups and len(groups[-1]) < group_size and len(X[i]) <= 2 * len(X[groups[-1][0]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    backprops = []
    for group in groups:
        group_X = [X[i] for i in group]
        group_input = group_X if side_inputs is None else (group_X, [side_inputs[i] for i in group])
        Y_group, backprop_group = pytorch_forward(model, group_input, is_train)
        for i, y in zip(group, Y_group):
            Y[i] = y
        backprops.append(backprop_group)

    def backprop(dY: List[Floats2d]) -> List[Floats2d]:
        dX = [model.ops.alloc2f(*x.shape) for x in X]
        for group, backprop_group in zip(groups, backprops):
            for i, dx in zip(group, backprop_group([dY[i] for i in group])):
                dX[i] = dx
        return dX

    return Y, backprop


def convert_padded_outputs(model: Model, X_Ytorch: Tuple[Any, torch.Tensor], is_train: bool):
    """convert_outputs for a module that maps padded docs to a padded (batch, length, nO) tensor.

    X is the group's input: a list of per-doc arrays, or a tuple whose first item is one.
    """
    X, outputs = X_Ytorch
    arrays = X[0] if isinstance(X, tuple) else X
    lengths = [len(x) for x in arrays]

    def backprop(dY: List[Floats2d]) -> ArgsKwargs:
        d_outputs, _ = pad_batch(model, dY, requires_grad=False, device=outputs.device)
        return ArgsKwargs(args=(outputs,), kwargs={"grad_tensors": d_outputs})

    return model.ops.unpad(torch2xp(outputs.detach()), lengths), backprop
