"""Registered model builders that compose the layers (what configs name)."""
from typing import Callable, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, chain, with_array
from thinc.types import Floats2d

from .layers.crf import CRF
from .windows import sentence_cuts


@registry.architectures("spacy-cner.CRFTagger.v1")
def build_crf_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    encoder: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
    nO: Optional[int] = None,
    sentence_encoding: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """Emission scores for a CRF: tok2vec -> optional encoder -> linear layer.

    The model's output is the per-token emission scores; the CRF that scores and
    decodes them is the ref "crf" (see spacy_cner.layers.crf). Initialize with
    the tag names as Y, which sets nO and the CRF's allowed transitions.

    tok2vec (Model[List[Doc], List[Floats2d]]): Any spaCy tok2vec or listener.
    encoder (Optional[Model[List[Floats2d], List[Floats2d]]]): Contextual encoder,
        e.g. spacy-cner.BiLSTMEncoder.v1.
    nO (Optional[int]): Number of tags; None infers it from the tag names.
    sentence_encoding (bool): The encoder reads each sentence of a doc on its own (cut
        after the tokens that end a sentence, as CharBigramEmbed's sentence_bigrams), so a
        sentence gets the same vectors alone and after another one (sentence-level
        robustness); the CRF still decodes the whole doc. A transformer tok2vec below
        still reads whole windows.
    RETURNS (Model[List[Doc], List[Floats2d]]): The tagger.
    """
    if sentence_encoding and encoder is None:
        raise ValueError("sentence_encoding needs an encoder (e.g. spacy-cner.BiLSTMEncoder.v1) to run per sentence.")
    if sentence_encoding and encoder.attrs.get("entity_attention_scale"):
        raise ValueError(
            "sentence_encoding cannot be combined with the encoder's entity_attention_scale yet "
            "(its gold entities are matched to whole docs): set one of them off."
        )
    output_layer = Linear(nO=nO)
    layers = [tok2vec] + ([encoder] if encoder is not None else [])
    emitter = chain(*layers, with_array(output_layer))
    crf = CRF()
    refs = {"tok2vec": tok2vec, "output_layer": output_layer, "crf": crf}
    if encoder is not None:
        refs["encoder"] = encoder
    return Model(
        "crf_tagger",
        forward,
        init=init,
        layers=[emitter, crf],
        refs=refs,
        dims={"nO": nO},
        attrs={"sentence_encoding": sentence_encoding},
    )


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The emission scores (n_tokens, n_tags) per doc."""
    if not model.attrs.get("sentence_encoding"):
        return model.layers[0](docs, is_train)
    xp = model.ops.xp
    tok2vec, encoder = model.get_ref("tok2vec"), model.get_ref("encoder")
    output = model.layers[0].layers[-1]  # with_array(output_layer)
    X, backprop_tok2vec = tok2vec(docs, is_train)
    cuts = [sentence_cuts(doc).tolist() for doc in docs]
    counts = numpy.cumsum([0] + [len(doc_cuts) + 1 for doc_cuts in cuts])
    H_pieces, backprop_encoder = encoder([p for x, c in zip(X, cuts) for p in xp.split(x, c)], is_train)
    H = [xp.concatenate(H_pieces[counts[i] : counts[i + 1]]) for i in range(len(docs))]
    Y, backprop_output = output(H, is_train)

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        dH = backprop_output(dY)
        dX_pieces = backprop_encoder([p for dh, c in zip(dH, cuts) for p in xp.split(dh, c)])
        dX = [xp.concatenate(dX_pieces[counts[i] : counts[i + 1]]) for i in range(len(docs))]
        return backprop_tok2vec(dX)

    return Y, backprop


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
