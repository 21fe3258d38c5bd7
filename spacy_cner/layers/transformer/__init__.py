"""A Hugging Face transformer as a spaCy tok2vec, with every hidden layer fine-tuned.

Loading, the tokenizer and serialisation are spacy-transformers' (HFWrapper,
huggingface_from_pretrained), so any BERT-style model works by name or local path,
and a saved or packaged pipeline carries its weights, config and vocab.
Unlike spacy-transformers' TransformerModel, which backpropagates into
last_hidden_state only, the backward pass here feeds the gradient of every hidden
state it uses into the transformer: with a scalar mix (NEZHA paper eqs. 11-12)
all L + 1 layers are fine-tuned through the mix.

- model.py: the thinc layer, TransformerTok2Vec (spacy-cner.TransformerTok2Vec.v1);
- hf.py: loading the Hugging Face model, its shim, running it;
- wordpieces.py: wordpieces aligned to tokens, long docs cut into windows at sentence ends;
- batch.py: padded batches of windows (attention mask, lexicon word ids).
A LEBERT lexicon adapter runs inside the transformer (layers/lexicon_adapter.py, lexicon_hook).

model.py (and with it spacy-transformers and transformers, seconds to import) is imported on first use of
TransformerTok2Vec, not by `import spacy_cner`: a character BiLSTM pipeline never needs it. spacy-transformers is
an extra (`spacy-cner[transformers]`): installed, spaCy imports its factories at every spacy.load. A config that
names spacy-cner.TransformerTok2Vec.v1 finds it through setup.cfg's entry point.
"""

from typing import Any

# The layer's name: CRFTagger(sentence_encoding=True) finds it by name and sets its "sentence_windows".
TRANSFORMER_TOK2VEC = "transformer_tok2vec"

__all__ = ["TransformerTok2Vec", "TRANSFORMER_TOK2VEC"]


def __getattr__(name: str) -> Any:
    if name == "TransformerTok2Vec":
        try:
            from .model import TransformerTok2Vec
        except ModuleNotFoundError as error:
            missing = (error.name or "").split(".")[0]
            if missing not in ("spacy_transformers", "transformers"):
                raise
            raise ImportError(
                f"spacy-cner.TransformerTok2Vec.v1 (the transformer configs) needs {missing}, which is not "
                'installed: pip install "spacy-cner[transformers]" (spacy-transformers and Hugging Face '
                "transformers; an extra, so that other pipelines load without importing them)."
            ) from error
        return TransformerTok2Vec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
