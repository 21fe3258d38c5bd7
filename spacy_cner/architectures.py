"""Registered model builders that compose the layers (what configs name)."""

from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, chain, with_array
from thinc.types import Floats2d, Ints1d

from .layers.entity_attention import gold_layers_out_of_reach, takes_gold, with_gold
from .backends.rowwise_ops import use_rowwise_ops
from .layers.crf import CRF
from .layers.transformer import TRANSFORMER_TOK2VEC
from .long_docs import cuts_computed_once, sentence_cuts


# The docs, or (docs, gold entity ids per doc) in crf_ner's update.
InT = Union[List[Doc], Tuple[List[Doc], List[Ints1d]]]


@registry.architectures("spacy-cner.CRFTagger.v1")
def build_crf_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    encoder: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
    nO: Optional[int] = None,
    sentence_encoding: Union[bool, str] = False,
) -> Model[InT, List[Floats2d]]:
    """Emission scores for a CRF: tok2vec -> optional encoder -> linear layer.

    The model's output is the per-token emission scores; the CRF that scores and
    decodes them is the ref "crf" (see spacy_cner.layers.crf). Initialize with
    the tag names as Y, which sets nO and the CRF's allowed transitions. In
    training the input may be (docs, gold entity ids per doc): the tok2vec or encoder
    with an entity_attention_scale gets them beside its input (spacy_cner.layers.entity_attention).

    tok2vec (Model[List[Doc], List[Floats2d]]): Any spaCy tok2vec or listener.
    encoder (Optional[Model[List[Floats2d], List[Floats2d]]]): Contextual encoder,
        e.g. spacy-cner.BiLSTMEncoder.v1.
    nO (Optional[int]): Number of tags; None infers it from the tag names.
    sentence_encoding (Union[bool, str]): True: the encoder reads each sentence of a doc on
        its own (cut after the tokens that end a sentence, as CharBigramEmbed's
        sentence_bigrams), so a sentence gets the same vectors alone and after another one
        (sentence-level robustness); the CRF still decodes the whole doc. A
        spacy-cner.TransformerTok2Vec.v1 tok2vec then also reads each sentence in a window of
        its own. Other tok2vecs are left as they are (spaCy's Tok2Vec sees a few tokens across
        a sentence end). "predict": the encoder reads whole docs in training (joined sentences
        among them, crf_ner's join_examples) and each sentence on its own when predicting
        (evaluation included); needs an encoder. False: whole docs.
    RETURNS (Model[InT, List[Floats2d]]): The tagger.
    """
    if sentence_encoding not in (True, False, "predict"):
        raise ValueError(f'sentence_encoding must be true, false or "predict", got {sentence_encoding!r}.')
    if sentence_encoding == "predict" and encoder is None:
        raise ValueError('sentence_encoding = "predict" needs an encoder (e.g. spacy-cner.BiLSTMEncoder.v1).')
    if sentence_encoding is True:
        transformers = [layer for layer in tok2vec.walk() if layer.name == TRANSFORMER_TOK2VEC]
        if encoder is None and not transformers:
            raise ValueError(
                "sentence_encoding needs an encoder (e.g. spacy-cner.BiLSTMEncoder.v1) or a "
                "spacy-cner.TransformerTok2Vec.v1 tok2vec to run per sentence."
            )
        for layer in transformers:
            layer.attrs["sentence_windows"] = True
    for name, layer in (("tok2vec", tok2vec), ("encoder", encoder)):
        inner = gold_layers_out_of_reach([layer], [tok2vec, encoder])
        if inner:
            raise ValueError(
                f"The CRF tagger hands gold entities to its {name} itself, not to the {inner[0].name} "
                f"layer inside it: make that layer the {name}, or set its entity_attention_scale to 0."
            )
    output_layer = Linear(nO=nO)
    layers = [tok2vec] + ([encoder] if encoder is not None else [])
    emitter = chain(*layers, with_array(output_layer))
    crf = CRF()
    refs = {"tok2vec": tok2vec, "output_layer": output_layer, "crf": crf}
    if encoder is not None:
        refs["encoder"] = encoder
    model = Model(
        "crf_tagger",
        forward,
        init=init,
        layers=[emitter, crf],
        refs=refs,
        dims={"nO": nO},
        attrs={"sentence_encoding": sentence_encoding},
    )
    use_rowwise_ops(model)
    return model


def forward(model: Model, X: InT, is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The emission scores (n_tokens, n_tags) per doc."""
    docs, entity_ids = with_gold(X)
    tok2vec = model.get_ref("tok2vec")
    encoder = model.get_ref("encoder") if model.has_ref("encoder") else None
    output = model.layers[0].layers[-1]  # with_array(output_layer), the emitter chain's last layer
    with cuts_computed_once(docs):
        H, backprop_tok2vec = _with_gold_if_taken(tok2vec, docs, entity_ids, is_train)
        mode = model.attrs.get("sentence_encoding")
        if encoder is not None and (mode is True or (mode == "predict" and not is_train)):
            H, backprop_encoder = _by_sentence(model, encoder, docs, H, entity_ids, is_train)
        elif encoder is not None:
            H, backprop_encoder = _with_gold_if_taken(encoder, H, entity_ids, is_train)
        else:
            backprop_encoder = None
    Y, backprop_output = output(H, is_train)

    def backprop(dY: List[Floats2d]) -> InT:
        dH = backprop_output(dY)
        if backprop_encoder is not None:
            dH = backprop_encoder(dH)
        backprop_tok2vec(dH)
        return X

    return Y, backprop


def _with_gold_if_taken(layer: Model, inputs, entity_ids, is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """Run the layer with the gold entity ids beside its input if it reads them; the backprop returns dX."""
    if entity_ids is None or not takes_gold(layer):
        return layer(inputs, is_train)
    Y, backprop_layer = layer((inputs, entity_ids), is_train)
    return Y, lambda dY: with_gold(backprop_layer(dY))[0]


def _by_sentence(model: Model, encoder: Model, docs: List[Doc], X: List[Floats2d], entity_ids, is_train: bool):
    """The encoder over each sentence of each doc on its own (sentence_encoding), the outputs joined per doc."""
    xp = model.ops.xp
    cuts = [sentence_cuts(doc).tolist() for doc in docs]
    if not any(cuts):  # one sentence per doc: the pieces are the docs (the encoder's output per sequence
        return _with_gold_if_taken(encoder, X, entity_ids, is_train)  # does not depend on the batch)
    counts = numpy.cumsum([0] + [len(doc_cuts) + 1 for doc_cuts in cuts])
    pieces = [p for x, c in zip(X, cuts) for p in xp.split(x, c)]
    id_pieces = None if entity_ids is None else [p for ids, c in zip(entity_ids, cuts) for p in numpy.split(ids, c)]
    H_pieces, backprop_encoder = _with_gold_if_taken(encoder, pieces, id_pieces, is_train)
    H = [_join(xp, H_pieces[counts[i] : counts[i + 1]]) for i in range(len(docs))]

    def backprop(dH: List[Floats2d]) -> List[Floats2d]:
        dX_pieces = backprop_encoder([p for dh, c in zip(dH, cuts) for p in xp.split(dh, c)])
        return [_join(xp, dX_pieces[counts[i] : counts[i + 1]]) for i in range(len(docs))]

    return H, backprop


def _join(xp, pieces: List[Floats2d]) -> Floats2d:
    """A doc's rows from its sentences' (no copy for a doc of one sentence)."""
    return pieces[0] if len(pieces) == 1 else xp.concatenate(pieces)


def init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[Sequence[str]] = None) -> None:
    """Size the output layer and build the CRF from the tag names given as Y."""
    if Y is not None:
        if model.has_dim("nO") and model.get_dim("nO") != len(Y):
            raise ValueError(
                f"The CRF tagger was configured with nO = {model.get_dim('nO')} but got "
                f"{len(Y)} tag names. Leave nO unset in the config to infer it."
            )
        model.set_dim("nO", len(Y), force=True)
        model.get_ref("output_layer").set_dim("nO", len(Y), force=True)
    model.layers[0].initialize(X=X)
    model.get_ref("crf").initialize(Y=Y)
