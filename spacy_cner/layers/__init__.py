"""thinc layers, one per file, that the architectures compose (they import backends/, never pipeline/ or training/).

Embeddings: char_bigram_embed (a token and its bigrams), key_embed (rows per key seen), ngram_vectors (frozen
vectors from the vocab); lexicons: soft_lexicon (SoftLexicon, softword), lexicon_adapter (LEBERT's adapter),
lexicon_slot (the lexicon such a layer holds); encoders: bilstm, tener (TENER), transformer/ (a Hugging Face
encoder as tok2vec), scalar_mix (a weighted sum of an encoder's layers), lac_features (LAC's tagger as a frozen
encoder); the attention fixes those encoders take: attention_window (cs) and entity_attention (cl); the output:
crf (the CRF) and crf_posteriors (token marginals, span probabilities); _torch: the torch layers' helpers.
"""
