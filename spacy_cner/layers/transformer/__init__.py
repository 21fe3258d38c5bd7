"""A Hugging Face transformer as a spaCy tok2vec, with every hidden layer fine-tuned.

Loading, the tokenizer and serialisation are spacy-transformers' (HFWrapper,
huggingface_from_pretrained), so any BERT-style model works by name or local path,
and a saved or packaged pipeline carries its weights, config and vocab.
Unlike spacy-transformers' TransformerModel, which backpropagates into
last_hidden_state only, the backward pass here feeds the gradient of every hidden
state it uses into the transformer: with a scalar mix (NEZHA paper eqs. 11-12)
all L + 1 layers are fine-tuned through the mix.

- this module: the registered function, TransformerTok2Vec (spacy-cner.TransformerTok2Vec.v1);
- model.py: the thinc layer it builds;
- hf.py: loading the Hugging Face model, its shim, running it;
- wordpieces.py: wordpieces aligned to tokens, long docs cut into windows at sentence ends;
- batch.py: padded batches of windows (attention mask, lexicon word ids).
A LEBERT lexicon adapter runs inside the transformer (layers/lexicon_adapter.py, lexicon_hook).

model.py (and with it spacy-transformers and transformers, seconds to import) is imported when
TransformerTok2Vec is called, not when it is imported or looked up: a character BiLSTM pipeline never needs it,
and setup.cfg's entry point (which spaCy loads with every other one of the registry, e.g. in `spacy package`)
must load without spacy-transformers, an extra (`spacy-cner[transformers]`; installed, spaCy imports its
factories at every spacy.load). Without it, calling TransformerTok2Vec says what to install.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

from spacy.tokens import Doc
from spacy.util import SimpleFrozenDict, registry
from thinc.api import Model
from thinc.types import Floats2d, Ints1d

# The layer's name: CRFTagger(sentence_encoding=True) finds it by name and sets its "sentence_windows".
TRANSFORMER_TOK2VEC = "transformer_tok2vec"
# The docs, or (docs, gold entity ids per doc) in crf_ner's update (entity_attention).
InT = Union[List[Doc], Tuple[List[Doc], List[Ints1d]]]
OutT = List[Floats2d]

__all__ = ["TransformerTok2Vec", "TRANSFORMER_TOK2VEC"]


@registry.architectures("spacy-cner.TransformerTok2Vec.v1")
def TransformerTok2Vec(
    name: str,
    scalar_mix: bool = True,
    window_size: int = 0,
    max_batch_windows: int = 64,
    attention_window: Optional[int] = None,
    entity_attention_scale: float = 0.0,
    lexicon_adapter: Optional[Model] = None,
    lexicon_layer: int = 1,
    tokenizer_config: Dict[str, Any] = SimpleFrozenDict(),
    transformer_config: Dict[str, Any] = SimpleFrozenDict(),
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = SimpleFrozenDict(),
) -> Model[InT, OutT]:
    """Token vectors from a Hugging Face encoder (BERT, RoBERTa-style, NEZHA).

    name (str): Model name on the Hugging Face hub or a local path, e.g. "bert-base-chinese".
        Read at initialize only: a saved pipeline carries the weights.
    scalar_mix (bool): Mix all L + 1 hidden states with trained weights (spacy-cner.ScalarMix.v1);
        False uses the last layer.
    window_size (int): Most wordpieces per window, special tokens included; 0 is the model's maximum.
    max_batch_windows (int): At prediction, windows per transformer call (bounds memory on long docs).
    attention_window (Optional[int]): Sliding-window constraint (Wang, Wang and Shen 2024, eq. 18):
        a wordpiece attends only to wordpieces whose tokens are at most this many tokens away
        (special tokens sit just before the first and after the last token), through a 3-D
        attention mask, in training and prediction; None attends to the whole window.
    entity_attention_scale (float): Entity-label enhancement, beta of Wang, Wang and Shen
        2024 (eqs. 15-16): in training, the attention scores (before the softmax) between
        wordpieces of the same gold entity are multiplied by 1 + beta in every layer and
        head (crf_ner provides the gold entities); 0 turns it off. Prediction is unchanged.
        Needs attention computed through a softmax (eager attention); models whose
        attention kernel fuses it away raise an error.
    lexicon_adapter (Optional[Model]): spacy-cner.LexiconAdapter.v1 (LEBERT): fuses the
        lexicon words that cover each wordpiece's characters into its hidden state after
        transformer layer lexicon_layer, so the layers above it (and the scalar mix of
        hidden states lexicon_layer...L) see them. Special tokens get no words.
    lexicon_layer (int): k, the layer after which the adapter runs (1 = after the first
        layer, LEBERT's best; 0 = on the embedding output).
    tokenizer_config (Dict[str, Any]): Keyword arguments for the tokenizer's from_pretrained.
    transformer_config (Dict[str, Any]): Keyword arguments for the model config's from_pretrained.
    mixed_precision (bool): Run the transformer in mixed precision (GPU).
    grad_scaler_config (Dict[str, Any]): Settings of the gradient scaler for mixed precision.
    RETURNS (Model[InT, List[Floats2d]]): The tok2vec; its input is the docs, or (docs, gold
        entity ids) in training with an entity_attention_scale.
    """
    settings = dict(locals())
    try:
        from . import model
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing not in ("spacy_transformers", "transformers"):
            raise
        raise ImportError(
            f"spacy-cner.TransformerTok2Vec.v1 (the transformer configs) needs {missing}, which is not "
            'installed: pip install "spacy-cner[transformers]" (spacy-transformers and Hugging Face '
            "transformers; an extra, so that other pipelines load without importing them)."
        ) from error
    return model.TransformerTok2Vec(**settings)
