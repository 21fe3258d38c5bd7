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
"""
from .model import TransformerTok2Vec

__all__ = ["TransformerTok2Vec"]
