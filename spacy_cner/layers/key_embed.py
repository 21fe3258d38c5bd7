"""An embedding table with one row per key seen in the training corpus, sized at initialize."""

from typing import Callable, Iterable, List, Optional, Tuple, cast

import numpy
from spacy.util import registry
from thinc.api import Model, Optimizer, get_array_module, uniform_init
from thinc.types import Floats2d, Ints1d, Ints2d

# Row 0 is every key the table has no row of: keys unseen in training, rarer than min_count, or
# hidden by CharBigramEmbed's bigram_dropout (which is what trains it).
UNKNOWN_ROW = 0


@registry.layers("spacy-cner.KeyEmbed.v1")
def KeyEmbed(nO: int, column: int, min_count: int = 1, dropout: Optional[float] = None) -> Model[Ints2d, Floats2d]:
    """An exact embedding table over the uint64 keys in one column of its input.

    thinc's HashEmbed sums four rows of a table of fixed size: on a newswire corpus of 283k
    distinct bigrams, 20k rows hold about 57 keys each, and a key never seen in training gets
    the rows of others. Here each key seen at least min_count times in the training corpus has a
    row of its own and every other key shares row 0. The keys are not known at construction:
    `set_keys` (crf_ner's initialize, from the whole train corpus) sets them and nV, and they
    are saved with the model (attrs), so a loaded pipeline looks up the same rows.

    Training touches a few thousand rows a step of a table that may hold hundreds of
    thousands: the backward pass records the rows it touched, and `update_rows` updates those
    rows only (torch's SparseAdam and TensorFlow's LazyAdam do the same), where a dense Adam
    step over the whole table would cost more than the rest of the step.

    nO (int): The width of a row.
    column (int): The input column that holds the keys.
    min_count (int): The occurrences in the training corpus a key needs to get a row.
    dropout (Optional[float]): The share of output columns dropped in training, as HashEmbed.
    RETURNS (Model[Ints2d, Floats2d]): The table, with nV unset until `set_keys`.
    """
    if min_count < 1:
        raise ValueError(f"KeyEmbed needs min_count >= 1, got {min_count}.")
    attrs = {"column": column, "min_count": min_count, "keys": numpy.zeros((0,), dtype="uint64")}
    if dropout is not None:
        attrs["dropout_rate"] = dropout
    return Model("key_embed", forward, init=init, params={"E": None}, dims={"nO": nO, "nV": None}, attrs=attrs)


def forward(model: Model[Ints2d, Floats2d], ids: Ints2d, is_train: bool) -> Tuple[Floats2d, Callable]:
    E = cast(Floats2d, model.get_param("E"))
    rows = lookup(model, ids[:, model.attrs["column"]])
    output = E[rows]  # shape: (n_tokens, nO)
    drop_mask = None
    if is_train:
        drop_mask = model.ops.get_dropout_mask((E.shape[1],), model.attrs.get("dropout_rate"))
        if drop_mask is not None:
            output *= drop_mask

    def backprop(d_output: Floats2d) -> Ints2d:
        if drop_mask is not None:
            d_output = d_output * drop_mask
        if not model.has_grad("E"):
            model.set_grad("E", model.ops.alloc2f(*E.shape))
        # In place: a (nV, nO) gradient array allocated once, only its touched rows non-zero.
        model.ops.scatter_add(model.get_grad("E"), model.ops.as_contig(rows, dtype="i"), d_output)
        touched = model.attrs.setdefault("touched_rows", [])
        touched.append(rows)
        if len(touched) > 64:  # a caller updating densely (model.finish_update) never clears them
            touched[:] = [model.ops.xp.unique(model.ops.xp.concatenate(touched))]
        return model.ops.xp.zeros(ids.shape, dtype=ids.dtype)  # keys carry no gradient

    return output, backprop


def init(model: Model[Ints2d, Floats2d], X: Optional[Ints2d] = None, Y: Optional[Floats2d] = None) -> None:
    if not model.has_dim("nV"):
        raise ValueError(
            "KeyEmbed has no keys: set them from the training corpus with "
            "spacy_cner.layers.key_embed.set_keys before initializing (crf_ner's initialize does)."
        )
    model.set_param("E", uniform_init(model.ops, (model.get_dim("nV"), model.get_dim("nO"))))


def lookup(model: Model, keys: Ints1d) -> Ints1d:
    """The row of each key: 1 + its index among the table's sorted keys, or UNKNOWN_ROW."""
    xp = model.ops.xp
    table_keys = xp.asarray(model.attrs["keys"])
    keys = xp.asarray(keys, dtype="uint64")
    if not len(table_keys):
        return xp.zeros(keys.shape, dtype="int64")
    index = xp.minimum(xp.searchsorted(table_keys, keys), len(table_keys) - 1)
    return xp.where(table_keys[index] == keys, index + 1, UNKNOWN_ROW)


def set_keys(model: Model, key_columns: Iterable[Ints2d]) -> int:
    """Give the table a row for each key of its column seen at least min_count times.

    model (Model): A KeyEmbed node, not initialized yet (or to be initialized again).
    key_columns (Iterable[Ints2d]): The key arrays of the training corpus, e.g. per doc.
    RETURNS (int): nV, the rows (the keys kept, plus the unknown row).
    """
    column = model.attrs["column"]
    counts: dict = {}
    chunk: List[numpy.ndarray] = []

    def count(parts: List[numpy.ndarray]) -> None:
        keys, n = numpy.unique(numpy.concatenate(parts), return_counts=True)
        for key, c in zip(keys.tolist(), n.tolist()):
            counts[key] = counts.get(key, 0) + c

    size = 0
    for keys in key_columns:
        chunk.append(numpy.asarray(model.ops.to_numpy(keys))[:, column].astype("uint64"))
        size += len(chunk[-1])
        if size >= 1_000_000:
            count(chunk)
            chunk, size = [], 0
    if chunk:
        count(chunk)
    kept = sorted(key for key, n in counts.items() if n >= model.attrs["min_count"])
    model.attrs["keys"] = numpy.asarray(kept, dtype="uint64")
    if model.has_dim("nV") and model.get_dim("nV") != len(kept) + 1:
        model.set_dim("nV", len(kept) + 1, force=True)
    else:
        model.set_dim("nV", len(kept) + 1)
    return len(kept) + 1


def touched_rows(model: Model) -> Optional[Ints1d]:
    """The rows whose gradient the backward passes since the last update wrote; None if none."""
    touched = model.attrs.get("touched_rows")
    if not touched:
        return None
    return model.ops.xp.unique(model.ops.xp.concatenate(touched))


def update_rows(model: Model, optimizer: Optimizer) -> None:
    """One optimizer step on the rows the backward passes touched: the optimizer's own rule
    (Adam, SGD, its clipping, decay and averages) on those rows, as if they were the whole table.

    Rows no example touched since the last step keep their weights and moments (no momentum step,
    no weight decay): the lazy Adam of torch's SparseAdam. The gradient norm that grad_clip reads
    is the same, the other rows' gradients being zero.
    """
    rows = touched_rows(model)
    model.attrs["touched_rows"] = []
    if rows is None or not model.has_grad("E"):
        return
    G = model.get_grad("E")
    update_table_rows(optimizer, (model.id, "E"), model.get_param("E"), rows, G[rows])
    G[rows] = 0


def update_table_rows(optimizer: Optimizer, key: Tuple, E: Floats2d, rows: Ints1d, gradient: Floats2d) -> None:
    """update_rows on a table's array E in place (any table: a thinc param, a torch parameter's array), given the
    gradient of those rows (distinct): the optimizer's rule on the rows, its state kept under key."""
    part = key + ("rows",)
    n_rows, width = E.shape
    # The optimizer's state of these rows under a key of their own, in the layout it keeps it:
    # the moments 1-D, the averages in the weights' shape.
    states = [(getattr(optimizer, name, None), name == "averages") for name in ("mom1", "mom2", "averages")]
    for state, shaped in states:
        if state is not None and key in state:
            values = state[key].reshape((n_rows, width))[rows]
            state[part] = values if shaped else values.ravel()
    optimizer.nr_update[part] = optimizer.nr_update[key]
    weights, _ = optimizer(part, E[rows], gradient)
    optimizer.nr_update[key] = optimizer.nr_update.pop(part)
    E[rows] = weights
    xp = get_array_module(E)
    for state, shaped in states:
        if state is not None and part in state:
            values = state.pop(part)
            if key not in state:
                state[key] = xp.zeros((n_rows, width) if shaped else (E.size,), dtype="float32")
            state[key].reshape((n_rows, width))[rows] = values.reshape((len(rows), width))
