"""Embed each token by its own text and the bigrams it forms with its neighbours."""

import itertools
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy
from spacy.attrs import NORM
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import HashEmbed, Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d, Ints2d

from ..long_docs import stacked_ends
from ..backends.rowwise_ops import use_rowwise_ops
from .key_embed import KeyEmbed, set_keys
from .ngram_vectors import ngram_vectors

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
    static_vectors: bool = False,
    soft_lexicon: Optional[Model] = None,
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
    static_vectors (bool): Also read pretrained character and bigram vectors from the
        pipeline's vectors ([initialize] vectors, e.g. word2vec text through `spacy init
        vectors`, such as Lattice-LSTM's gigaword_chn.all.a2b.uni and .bi files joined):
        the vectors of each token, of its next bigram and (with prev_bigram) of its previous
        bigram, frozen, zeros where the table has none, mixed with the hash embeddings.
    soft_lexicon (Optional[Model]): spacy-cner.SoftLexicon.v1, lexicon features (word
        positions, frequencies and gazetteer types) mixed with the hash embeddings.
    RETURNS (Model[List[Doc], List[Floats2d]]): The embedding layer.
    """
    # The arguments, by name: each version's are its own defaults over the one builder.
    return _char_bigram_embed(**locals())


@registry.architectures("spacy-cner.CharBigramEmbed.v2")
def CharBigramEmbed_v2(
    width: int,
    char_rows: int = 10000,
    bigram_rows: Optional[int] = None,
    bigram_min_count: int = 1,
    prev_bigram: bool = True,
    dropout: float = 0.0,
    embed_width: Optional[int] = None,
    bigram_dropout: float = 0.0,
    sentence_bigrams: bool = False,
    lexicon_adapter: Optional[Model] = None,
    static_vectors: bool = False,
    soft_lexicon: Optional[Model] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """CharBigramEmbed.v1 whose bigram tables are sized from the training corpus.

    With bigram_rows null, each bigram table has a row for every bigram seen at least
    bigram_min_count times in the train corpus and one unknown row that every other bigram
    shares (spacy-cner.KeyEmbed.v1: unseen bigrams read the row that bigram_dropout trains,
    instead of the hashed rows of other bigrams); crf_ner's initialize counts them, prints the
    sizes, and the pipeline saves the tables. An int keeps v1's hash tables of that many rows.
    The other arguments are v1's.

    bigram_rows (Optional[int]): Rows of each hashed bigram table; None: exact tables.
    bigram_min_count (int): With exact tables, the occurrences a bigram needs to get a row.
    RETURNS (Model[List[Doc], List[Floats2d]]): The embedding layer.
    """
    # The arguments, by name: each version's are its own defaults over the one builder.
    return _char_bigram_embed(**locals())


@registry.architectures("spacy-cner.CharBigramEmbed.v3")
def CharBigramEmbed_v3(
    width: int,
    char_rows: int = 10000,
    bigram_rows: Optional[int] = None,
    bigram_min_count: int = 1,
    prev_bigram: bool = True,
    dropout: float = 0.0,
    embed_width: Optional[int] = None,
    bigram_dropout: float = 0.0,
    sentence_bigrams: bool = False,
    lexicon_adapter: Optional[Model] = None,
    static_vectors: bool = False,
    soft_lexicon: Optional[Model] = None,
    lac_features: Optional[Model] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """CharBigramEmbed.v2 that also mixes in a frozen contextual encoder's features: LAC's tagger's
    states and emission scores per token (spacy-cner.LacFeatures.v1), concatenated with the hash
    embeddings, vectors and lexicon features before the Maxout layer. The other arguments are v2's.

    lac_features (Optional[Model]): spacy-cner.LacFeatures.v1.
    RETURNS (Model[List[Doc], List[Floats2d]]): The embedding layer.
    """
    # The arguments, by name: each version's are its own defaults over the one builder.
    return _char_bigram_embed(**locals())


def _char_bigram_embed(
    width: int,
    char_rows: int,
    bigram_rows: Optional[int],
    prev_bigram: bool,
    dropout: float,
    embed_width: Optional[int],
    bigram_dropout: float,
    sentence_bigrams: bool,
    lexicon_adapter: Optional[Model],
    static_vectors: bool,
    soft_lexicon: Optional[Model],
    bigram_min_count: int = 1,
    lac_features: Optional[Model] = None,
) -> Model[List[Doc], List[Floats2d]]:
    embed_width = embed_width or width
    tables = [HashEmbed(embed_width, char_rows, column=0, seed=11, dropout=dropout)]
    for column, seed in ((1, 12), (2, 13))[: 2 if prev_bigram else 1]:
        if bigram_rows is None:
            tables.append(KeyEmbed(embed_width, column, min_count=bigram_min_count, dropout=dropout))
        else:
            tables.append(HashEmbed(embed_width, bigram_rows, column=column, seed=seed, dropout=dropout))
    keys = ngram_keys(prev_bigram, bigram_dropout, sentence_bigrams)
    extra = [ngram_vectors(prev_bigram, sentence_bigrams)] if static_vectors else []
    if soft_lexicon is not None:
        extra.append(soft_lexicon)
    if lac_features is not None:
        extra.append(lac_features)
    if extra:
        # The vectors', lexicon and LAC features' widths are known at initialize: the mix infers its input.
        mix = Maxout(width, nP=3, dropout=dropout, normalize=True)
        features = concatenate(chain(keys, with_array(concatenate(*tables))), *extra)
        model = chain(features, with_array(mix))
    else:
        mix = Maxout(width, embed_width * len(tables), nP=3, dropout=dropout, normalize=True)
        model = chain(keys, with_array(chain(concatenate(*tables), mix)))
    model.set_dim("nO", width)
    if lexicon_adapter is not None:
        lexicon_adapter.set_dim("nI", width)
        model = Model(
            "char_bigram_lexicon",
            _lexicon_forward,
            init=_lexicon_init,
            layers=[model, lexicon_adapter],
            refs={"lexicon_adapter": lexicon_adapter},
            dims={"nO": width},
        )
    use_rowwise_ops(model)
    return model


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
    """The keys of all docs computed at once over their concatenation (per doc they cost more in
    Python than in arithmetic), then split: each doc's keys are those it gets alone."""
    xp = model.ops.xp
    lengths = [len(doc) for doc in docs]
    n_columns = 3 if model.attrs["prev_bigram"] else 2
    if not sum(lengths):
        return [xp.zeros((0, n_columns), dtype="uint64") for _ in docs], lambda d_keys: []
    token_keys = xp.concatenate([xp.asarray(doc.to_array(NORM), dtype="uint64").reshape(-1) for doc in docs])
    # The last token of each doc, and of each sentence when sentence_bigrams: no right neighbour;
    # the token after it has no left one.
    ends = xp.asarray(stacked_ends(docs, bool(model.attrs.get("sentence_bigrams"))))
    right = xp.empty_like(token_keys)
    right[:-1] = token_keys[1:]
    right[ends] = BOUNDARY
    left = xp.empty_like(token_keys)
    left[1:] = token_keys[:-1]
    left[0] = BOUNDARY
    left[ends[ends + 1 < len(token_keys)] + 1] = BOUNDARY
    # Keys of the bigrams (left, token) and (token, right); uint64 arithmetic wraps.
    mix = xp.uint64(BIGRAM_MIX)
    columns = [token_keys, token_keys * mix + right]
    if model.attrs["prev_bigram"]:
        columns.append(left * mix + token_keys)
    keys = xp.stack(columns, axis=1)
    if is_train and model.attrs["bigram_dropout"] > 0:
        # One draw for the batch: the same numbers, in the same order, as one draw per doc.
        dropped = numpy.random.random_sample(keys[:, 1:].shape) < model.attrs["bigram_dropout"]
        keys[:, 1:][xp.asarray(dropped)] = UNKNOWN_BIGRAM
    return xp.split(keys, numpy.cumsum(lengths)[:-1].tolist()), lambda d_keys: []


def size_key_tables(model: Model, docs: Iterable[Doc], batch_size: int = 1000) -> Dict[str, int]:
    """Give the exact bigram tables (spacy-cner.KeyEmbed.v1) inside model a row per bigram of docs.

    The keys are the ones the model's ngram_keys layer computes at prediction (no bigram
    dropout), so a bigram's row at training and at prediction is the same.

    model (Model): A model holding a CharBigramEmbed.v2 with bigram_rows null.
    docs (Iterable[Doc]): The training corpus's docs, read once.
    batch_size (int): Docs per pass of the keys layer.
    RETURNS (Dict[str, int]): Each table's rows, by its input column ("column 1": ...); {} when
        the model has no exact table.
    """
    tables = [node for node in model.walk() if node.name == "key_embed"]
    if not tables:
        return {}
    producers = [node for node in model.walk() if node.name == "ngram_keys"]
    if len(producers) != 1:
        raise ValueError(f"Expected one ngram_keys layer feeding the exact bigram tables, found {len(producers)}.")
    keys_layer = producers[0]
    keys: List[Ints2d] = []
    batch: List[Doc] = []
    for doc in itertools.chain(docs, [None]):
        if doc is not None:
            batch.append(doc)
        if batch and (doc is None or len(batch) >= batch_size):
            keys.extend(keys_layer.predict(batch))
            batch = []
    return {f"column {table.attrs['column']}": set_keys(table, keys) for table in tables}
