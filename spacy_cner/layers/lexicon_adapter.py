"""The Lexicon Adapter of LEBERT (Liu et al., ACL 2021, section 3.1): lexicon words fused into characters.

For character i with hidden state h_i and the embeddings x_ij of the lexicon words
that cover it (spacy_cner.lexicon.Lexicon.match):
    v_ij = W2 tanh(W1 x_ij + b1) + b2                  (eq. 4, words to the hidden width)
    a_i  = softmax(h_i W_attn V_i^T), padding masked   (eq. 5, bilinear attention)
    z_i  = sum_j a_ij v_ij                             (eq. 6)
    out  = LayerNorm(h_i + dropout(z_i))               (eq. 7)
A character that no word covers gets z_i = 0: out = LayerNorm(h_i).
"""

import copy
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, registry, torch2xp
from thinc.types import Floats2d
from torch import nn

from ..lexicon import doc_text, token_spans
from ._torch import (
    Dropout,
    RebuildableModule,
    convert_padded_outputs,
    forward_by_length,
    pad_batch,
    set_torch_module,
    torch_module,
    wrap_rebuildable,
)
from .lexicon_slot import LexiconSlot, required_lexicon

InT = Tuple[List[Doc], List[Floats2d]]
OutT = List[Floats2d]


class LexiconAdapterModule(nn.Module):
    """Fuse matched word embeddings into character hidden states (batch-first tensors)."""

    def __init__(
        self,
        hidden_width: int,
        word_width: int,
        dropout: float = 0.1,
        layer_norm: bool = True,
        zero_output: bool = False,
    ) -> None:
        """layer_norm False: out = h_i + dropout(z_i) (inside an encoder whose states are not normalised, LAC's);
        zero_output: W2 and b2 start at zero, so the adapter starts as the identity (then or without a norm)."""
        super().__init__()
        self.hparams = {"hidden_width": hidden_width, "word_width": word_width, "dropout": dropout}
        self.word_transform = nn.Linear(word_width, hidden_width)  # W1, b1
        self.word_output = nn.Linear(hidden_width, hidden_width)  # W2, b2
        if zero_output:
            nn.init.zeros_(self.word_output.weight)
            nn.init.zeros_(self.word_output.bias)
        self.attention = nn.Parameter(torch.empty(hidden_width, hidden_width))  # W_attn
        nn.init.xavier_uniform_(self.attention)
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(hidden_width) if layer_norm else nn.Identity()

    def forward(self, hidden: torch.Tensor, words: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        """hidden (batch, length, hidden_width); words (batch, length, n_words, word_width);
        word_mask (batch, length, n_words), true for real words. RETURNS (batch, length, hidden_width)."""
        values = self.word_output(torch.tanh(self.word_transform(words)))
        # shape: (batch, length, n_words)
        scores = torch.einsum("bld,de,blme->blm", hidden, self.attention, values)
        scores = scores.masked_fill(~word_mask, float("-inf"))
        has_words = word_mask.any(dim=-1, keepdim=True)
        # A character without words would softmax over nothing (nan): give it zero weights.
        weights = torch.softmax(scores.masked_fill(~has_words, 0.0), dim=-1) * word_mask
        fused = torch.einsum("blm,blmd->bld", weights, values)
        return self.norm(hidden + self.dropout(fused))


class LexiconAdapterNet(torch.nn.Module, RebuildableModule):
    """Word embeddings (a trained table, or frozen vectors) and the adapter that fuses them."""

    def __init__(
        self,
        hidden_width: Optional[int],
        word_width: int,
        n_rows: int,
        hashed: bool,
        dropout: float,
        word_dropout: float = 0.0,
        layer_norm: bool = True,
        zero_output: bool = False,
    ) -> None:
        super().__init__()
        self.hparams = {
            "hidden_width": hidden_width,
            "word_width": word_width,
            "n_rows": n_rows,
            "hashed": hashed,
            "dropout": dropout,
            "word_dropout": word_dropout,
            "layer_norm": layer_norm,
            "zero_output": zero_output,
        }
        # A trained table (n_rows > 0), or frozen vectors that the lexicon holds and
        # set_frozen attaches: not a parameter, not in the state dict (saved once, in float16).
        # The table starts at zero: a word that training never saw stays the zero vector,
        # "a word of unknown identity", as a word hidden by word_dropout is.
        self.table = torch.nn.Embedding(n_rows, word_width) if n_rows else None
        if self.table is not None:
            torch.nn.init.zeros_(self.table.weight)
        self.word_dropout = word_dropout
        self.frozen: Optional[torch.Tensor] = None
        self.adapter = (
            LexiconAdapterModule(hidden_width, word_width, dropout, layer_norm, zero_output) if hidden_width else None
        )

    @property
    def is_built(self) -> bool:
        return self.adapter is not None

    def get_input_embeddings(self) -> Optional[torch.nn.Embedding]:
        """The trained word table, which adversarial training perturbs; None when frozen."""
        return self.table

    def set_frozen(self, vectors: numpy.ndarray) -> None:
        device = self.adapter.attention.device
        self.frozen = torch.from_numpy(numpy.ascontiguousarray(vectors, dtype="float32")).to(device)

    def forward(self, hidden: torch.Tensor, rows: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        """hidden (batch, length, hidden_width); rows (batch, length, n_words, n_hashes), the
        table rows of each word (summed); word_mask (batch, length, n_words)."""
        table = self.table.weight if self.table is not None else self.frozen
        if table is None:
            raise ValueError("The lexicon adapter's frozen word vectors are not attached.")
        words = torch.nn.functional.embedding(rows, table).sum(dim=-2)
        if self.training and self.word_dropout > 0:
            # Hide words' identities (not the words): the adapter learns to use a word it
            # has no trained vector for, as it meets them in new text.
            keep = torch.rand(word_mask.shape, device=words.device) >= self.word_dropout
            words = words * keep.unsqueeze(-1).to(words.dtype)
        return self.adapter(hidden, words.to(hidden.dtype), word_mask)


@registry.layers("spacy-cner.LexiconAdapter.v1")
def LexiconAdapter(
    max_words_per_char: int = 3,
    word_width: int = 64,
    word_rows: int = 50000,
    fine_tune_vectors: bool = False,
    dropout: float = 0.1,
    word_dropout: float = 0.0,
    nI: Optional[int] = None,
) -> Model[InT, OutT]:
    """LEBERT's Lexicon Adapter: lexicon words fused into per-token hidden states.

    Takes (docs, hidden states per token) and returns the fused states (same width).
    On CPU pipelines it follows the character + bigram embeddings (the lexicon_adapter of
    spacy-cner.CharBigramEmbed.v1); in a transformer it follows layer k (the lexicon_adapter
    and lexicon_layer of spacy-cner.TransformerTok2Vec.v1). The lexicon comes from the
    pipe's initialize (e.g. [initialize.components.crf_ner.lexicon] with
    spacy-cner.lexicon.v1); the pipe saves it (vectors in float16) and gives it back on loading.

    max_words_per_char (int): Most words per character; the longest are kept (spacy_cner.lexicon).
    word_width (int): Width of the trained word embeddings when the lexicon has no vectors.
    word_rows (int): Rows of that table: each word sums 2 hashed rows, so a 350k-word
        lexicon trains a table of this size, not one row per word.
    fine_tune_vectors (bool): With a vector lexicon, train the vectors (a full float32
        table in the saved pipeline) instead of keeping them frozen (float16, no gradient).
    dropout (float): Dropout on the fused word vector (eq. 7).
    word_dropout (float): In training, the share of matched words whose embedding is
        replaced by zeros, the embedding that words never seen in training keep in the
        zero-initialised table: the model learns to use words it has no vector for.
    nI (Optional[int]): Width of the hidden states; None takes it from the data or the transformer.
    RETURNS (Model[Tuple[List[Doc], List[Floats2d]], List[Floats2d]]): The adapter.
    """
    if max_words_per_char < 1:
        raise ValueError(f"max_words_per_char must be at least 1, got {max_words_per_char}.")
    placeholder = LexiconAdapterNet(None, word_width, 0, False, dropout)
    model = wrap_rebuildable(
        "lexicon_adapter",
        placeholder,
        _convert_inputs,
        convert_padded_outputs,
        init=init,
        forward=forward,
        dims={"nI": nI, "nO": nI},
    )
    model.attrs.update(
        {
            "lexicon": LexiconSlot(),
            "max_words_per_char": max_words_per_char,
            "word_width": word_width,
            "word_rows": word_rows,
            "fine_tune_vectors": fine_tune_vectors,
            "dropout": dropout,
            "word_dropout": word_dropout,
        }
    )
    return model


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    """Build the word embeddings and the adapter for the lexicon and the hidden width."""
    slot = model.attrs["lexicon"]
    if slot.lexicon is None:
        raise ValueError(
            "The lexicon adapter has no lexicon. Set one in the training config, e.g.\n"
            '[initialize.components.crf_ner.lexicon]\n@misc = "spacy-cner.lexicon.v1"\n'
            'source = "jieba"\nor pass lexicon= to the pipe\'s initialize.'
        )
    if X is not None and X[1] and not model.has_dim("nI"):
        model.set_dim("nI", X[1][0].shape[1])
    if not model.has_dim("nI"):
        raise ValueError("The lexicon adapter needs sample data or nI to initialize.")
    width = model.get_dim("nI")
    model.set_dim("nO", width, force=True)
    lexicon = slot.lexicon
    # Set by an encoder that holds the adapter inside it (LacFeatures.v2): no LayerNorm, identity at the start.
    dropouts = {
        "dropout": model.attrs["dropout"],
        "word_dropout": model.attrs["word_dropout"],
        "layer_norm": model.attrs.get("layer_norm", True),
        "zero_output": model.attrs.get("zero_output", False),
    }
    if lexicon.vectors is None:
        module = LexiconAdapterNet(width, model.attrs["word_width"], model.attrs["word_rows"], True, **dropouts)
    elif model.attrs["fine_tune_vectors"]:
        module = LexiconAdapterNet(width, lexicon.vectors.shape[1], max(len(lexicon), 1), False, **dropouts)
        with torch.no_grad():
            module.table.weight[: len(lexicon)] = torch.from_numpy(lexicon.vectors)
        # The trained table holds the vectors now: the saved lexicon needs only the words.
        words_only = copy.copy(lexicon)
        words_only.vectors = None
        model.attrs["lexicon"] = LexiconSlot(words_only)
    else:
        module = LexiconAdapterNet(width, lexicon.vectors.shape[1], 0, False, **dropouts)
    set_torch_module(model, module)
    _prepared(model)


def _prepared(model: Model) -> LexiconAdapterNet:
    """The module, with the lexicon's frozen vectors attached (after loading, on first use)."""
    module = torch_module(model)
    if not module.is_built:
        raise ValueError("The lexicon adapter is not initialized: initialize the pipeline (or load a saved one).")
    if module.table is None and module.frozen is None:
        module.set_frozen(required_lexicon(model).vectors)
    return module


def word_ids(model: Model, text: str, spans: Sequence[Tuple[int, int]]) -> numpy.ndarray:
    """Per (start, end) character span of text, its words' indices (n_spans, max_words_per_char), -1 for none."""
    return required_lexicon(model).word_ids(text, spans, model.attrs["max_words_per_char"])


def token_word_ids(model: Model, doc: Doc) -> numpy.ndarray:
    """word_ids for the doc's tokens; whitespace tokens get none."""
    return word_ids(model, doc_text(doc), token_spans(doc))


def table_rows_of_words(
    model: Model, module: LexiconAdapterNet, ids: numpy.ndarray, device: torch.device
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Word indices (..., n_words), -1 for none -> the table rows (..., n_words, n_hashes) and the mask."""
    mapping = model.attrs["lexicon"].rows(module.hparams["n_rows"], module.hparams["hashed"])
    ids = numpy.asarray(ids)
    mask = ids >= 0
    if mapping.shape[0]:
        rows = mapping[numpy.where(mask, ids, 0)]
    else:  # an empty lexicon: nothing matches
        rows = numpy.zeros(ids.shape + (1,), dtype="int64")
    return torch.as_tensor(rows, device=device), torch.as_tensor(mask, device=device)


def fuse(model: Model, hidden: torch.Tensor, ids: numpy.ndarray) -> torch.Tensor:
    """Run the adapter on a padded batch of hidden states inside a torch graph (a transformer).

    hidden (batch, length, width); ids (batch, length, n_words) word indices, -1 for none.
    """
    module = _prepared(model)
    rows, mask = table_rows_of_words(model, module, ids, hidden.device)
    return module(hidden, rows, mask)


def forward(model: Model[InT, OutT], inputs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Fuse each doc's matched words into its token vectors; returns the input gradients."""
    docs, X = inputs
    ids = [token_word_ids(model, doc) for doc in docs]
    # The backprop returns the gradient of the hidden states (the docs get none).
    return forward_by_length(model, X, is_train, side_inputs=ids)


def _convert_inputs(model: Model, inputs, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    X, ids = inputs
    module = _prepared(model)
    device = module.adapter.attention.device
    hidden, _ = pad_batch(model, X, requires_grad=is_train, device=device)
    padded = numpy.full(tuple(hidden.shape[:2]) + (model.attrs["max_words_per_char"],), -1, dtype="int64")
    for i, doc_ids in enumerate(ids):
        padded[i, : len(doc_ids)] = doc_ids
    rows, mask = table_rows_of_words(model, module, padded, device)
    lengths = [len(x) for x in X]

    def backprop(d_inputs: ArgsKwargs) -> List[Floats2d]:
        return model.ops.unpad(torch2xp(d_inputs.args[0]), lengths)

    return ArgsKwargs(args=(hidden, rows, mask), kwargs={}), backprop


@contextmanager
def lexicon_hook(
    adapter: Model, hf_model: torch.nn.Module, layer: int, ids: numpy.ndarray, is_train: bool
) -> Iterator[None]:
    """LEBERT's placement inside a transformer: while the block runs, the output of layer `layer`
    (0: the embeddings) is replaced by the adapter's fusion of it with the lexicon words `ids`,
    (n_windows, length, max_words_per_char) as transformer.batch.window_batch makes them."""
    site = adapter_site(hf_model, layer)
    torch_module(adapter).train(is_train)

    def hook(module, args, output):
        if isinstance(output, tuple):
            return (fuse(adapter, output[0], ids),) + tuple(output[1:])
        return fuse(adapter, output, ids)

    handle = site.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def adapter_site(hf_model, layer: int) -> torch.nn.Module:
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


def backward_unscaled(module: torch.nn.Module, scaler, run_backward: Callable[[], None]) -> None:
    """Run the transformer's backward pass; with mixed precision, unscale the module's new gradients.

    The transformer's grad scaler scales the gradients that flow into the adapter inside it,
    but unscales only the transformer's own parameters. When a gradient overflowed (the scaler
    found inf or nan, in the transformer or here), the transformer skips this update and the
    scaler backs off; the adapter drops this pass's gradients too. Kept, they turned every
    adapter weight into nan at the first step of a LEBERT training in mixed precision (H100, 2026-11-26),
    since the adapter's own shim has no scaler to stop the update.
    """
    if not getattr(scaler, "_enabled", False):
        run_backward()
        return
    params = [p for p in module.parameters() if p.requires_grad]
    saved = [p.grad for p in params]
    for param in params:
        param.grad = None
    run_backward()
    overflowed = scaler.unscale([p.grad for p in params if p.grad is not None])
    for param, grad in zip(params, saved):
        if overflowed or param.grad is None:
            param.grad = grad
        elif grad is not None:
            param.grad = param.grad + grad
