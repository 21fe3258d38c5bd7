"""Registered model builders that compose the layers (what configs name)."""
from typing import Callable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, chain, with_array
from thinc.types import Floats2d

from .layers.crf import CRF


@registry.architectures("spacy-cner.CRFTagger.v1")
def build_crf_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    encoder: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
    nO: Optional[int] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """Emission scores for a CRF: tok2vec -> optional encoder -> linear layer.

    The model's output is the per-token emission scores; the CRF that scores and
    decodes them is the ref "crf" (see spacy_cner.layers.crf). Initialize with
    the tag names as Y, which sets nO and the CRF's allowed transitions.

    tok2vec (Model[List[Doc], List[Floats2d]]): Any spaCy tok2vec or listener.
    encoder (Optional[Model[List[Floats2d], List[Floats2d]]]): Contextual encoder,
        e.g. spacy-cner.BiLSTMEncoder.v1.
    nO (Optional[int]): Number of tags; None infers it from the tag names.
    RETURNS (Model[List[Doc], List[Floats2d]]): The tagger.
    """
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
    )


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The emission scores (n_tokens, n_tags) per doc."""
    return model.layers[0](docs, is_train)


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
