"""Embed each token by its own text and the bigrams it forms with its neighbours."""
from typing import Callable, List, Optional, Tuple

import numpy
from spacy.attrs import NORM
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import HashEmbed, Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d, Ints2d

from ..windows import ends_sentence

# Stand-in key for the missing neighbour at either end of a doc.
BOUNDARY = 0x2E5D_0B0D_A17F_0C1A
# Key that stands in for a bigram hidden by bigram_dropout.
UNKNOWN_BIGRAM = 0x5A17_B16A_0000_0001
# Odd multiplier that mixes the left key into a bigram key (wraps in uint64).
BIGRAM_MIX = 0x9E37_79B9_7F4A_7C15


@registry.architectures("spacy-cner.CharBigramEmbed.v1")
def CharBigramEmbed(
    width: int,
    char_rows: int = 10000,
    bigram_rows: int = 50000,
    prev_bigram: bool = True,
    dropout: float = 0.0,
    embed_width: Optional[int] = None,
    bigram_dropout: float = 0.0,
    sentence_bigrams: bool = False,
    lexicon_adapter: Optional[Model] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """Character + bigram embedding for Chinese, as a spaCy tok2vec.

    Each token (a character in a blank "zh" pipeline, a word in a segmented doc)
    is embedded by its normalised text, the bigram it forms with the next token
    (TENER, Lattice-LSTM) and, optionally, the bigram with the previous token.
    The hashed embeddings are concatenated and mixed by a Maxout layer.

    width (int): Output width.
    char_rows (int): Rows of the character hash table.
    bigram_rows (int): Rows of each bigram hash table.
    prev_bigram (bool): Also embed the (previous, current) bigram.
    dropout (float): Dropout on the embeddings and the mixing layer.
    embed_width (Optional[int]): Width of each hash table; None means `width`.
        Narrower tables train faster: every step updates every row.
    bigram_dropout (float): In training, the share of bigrams replaced by an
        unknown-bigram key, so the model does not lean on rare bigrams alone.
    sentence_bigrams (bool): No bigram spans a sentence end (a token of 。！？!?;； or
        a newline): the tokens on either side get the doc-boundary bigram instead, so a
        sentence has the same features alone and after another sentence (robustness).
    lexicon_adapter (Optional[Model]): spacy-cner.LexiconAdapter.v1, to fuse the lexicon
        words that cover each character into its vector (LEBERT's adapter, on CPU).
    RETURNS (Model[List[Doc], List[Floats2d]]): The embedding layer.
    """
    embed_width = embed_width or width
    tables = [HashEmbed(embed_width, char_rows, column=0, seed=11, dropout=dropout)]
    tables.append(HashEmbed(embed_width, bigram_rows, column=1, seed=12, dropout=dropout))
    if prev_bigram:
        tables.append(HashEmbed(embed_width, bigram_rows, column=2, seed=13, dropout=dropout))
    mix = Maxout(width, embed_width * len(tables), nP=3, dropout=dropout, normalize=True)
    model = chain(
        ngram_keys(prev_bigram, bigram_dropout, sentence_bigrams),
        with_array(chain(concatenate(*tables), mix)),
    )
    model.set_dim("nO", width)
    if lexicon_adapter is None:
        return model
    lexicon_adapter.set_dim("nI", width)
    return Model(
        "char_bigram_lexicon",
        _lexicon_forward,
        init=_lexicon_init,
        layers=[model, lexicon_adapter],
        refs={"lexicon_adapter": lexicon_adapter},
        dims={"nO": width},
    )


def _lexicon_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    embed, adapter = model.layers
    embed.initialize(X=X)
    adapter.initialize()


def _lexicon_forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The embeddings, then the lexicon adapter over them."""
    embed, adapter = model.layers
    X, backprop_embed = embed(docs, is_train)
    Y, backprop_adapter = adapter((docs, X), is_train)

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        return backprop_embed(backprop_adapter(dY))

    return Y, backprop


def ngram_keys(
    prev_bigram: bool, bigram_dropout: float = 0.0, sentence_bigrams: bool = False
) -> Model[List[Doc], List[Ints2d]]:
    """Per doc, the uint64 keys (n_tokens, 2 or 3): token, next bigram, previous bigram."""
    attrs = {"prev_bigram": prev_bigram, "bigram_dropout": bigram_dropout, "sentence_bigrams": sentence_bigrams}
    return Model("ngram_keys", _ngram_keys_forward, attrs=attrs)


def _ngram_keys_forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Ints2d], Callable]:
    xp = model.ops.xp
    keys = []
    for doc in docs:
        token_keys = xp.asarray(doc.to_array(NORM), dtype="uint64")
        padded = xp.concatenate([xp.asarray([BOUNDARY], dtype="uint64"), token_keys, xp.asarray([BOUNDARY], dtype="uint64")])
        left, right = padded[:-2].copy(), padded[2:].copy()
        if model.attrs.get("sentence_bigrams"):
            ends = [t.i for t in doc[:-1] if ends_sentence(t.text)]
            if ends:
                ends = xp.asarray(ends)
                right[ends] = BOUNDARY
                left[ends + 1] = BOUNDARY
        # Keys of the bigrams (left, token) and (token, right); uint64 arithmetic wraps.
        mix = xp.uint64(BIGRAM_MIX)
        columns = [token_keys, token_keys * mix + right]
        if model.attrs["prev_bigram"]:
            columns.append(left * mix + token_keys)
        doc_keys = xp.stack(columns, axis=1) if len(doc) else xp.zeros((0, len(columns)), dtype="uint64")
        if is_train and model.attrs["bigram_dropout"] > 0:
            dropped = numpy.random.random_sample(doc_keys[:, 1:].shape) < model.attrs["bigram_dropout"]
            doc_keys[:, 1:][xp.asarray(dropped)] = UNKNOWN_BIGRAM
        keys.append(doc_keys)
    return keys, lambda d_keys: []
