"""The Lexicon Adapter of LEBERT (Liu et al., ACL 2021, section 3.1): lexicon words fused into characters.

For character i with hidden state h_i and the embeddings x_ij of the lexicon words
that cover it (spacy_cner.lexicon.Lexicon.match):
    v_ij = W2 tanh(W1 x_ij + b1) + b2                  (eq. 4, words to the hidden width)
    a_i  = softmax(h_i W_attn V_i^T), padding masked   (eq. 5, bilinear attention)
    z_i  = sum_j a_ij v_ij                             (eq. 6)
    out  = LayerNorm(h_i + dropout(z_i))               (eq. 7)
A character that no word covers gets z_i = 0: out = LayerNorm(h_i).
"""
import torch
from torch import nn


class LexiconAdapterModule(nn.Module):
    """Fuse matched word embeddings into character hidden states (batch-first tensors)."""

    def __init__(self, hidden_width: int, word_width: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.hparams = {"hidden_width": hidden_width, "word_width": word_width, "dropout": dropout}
        self.word_transform = nn.Linear(word_width, hidden_width)  # W1, b1
        self.word_output = nn.Linear(hidden_width, hidden_width)  # W2, b2
        self.attention = nn.Parameter(torch.empty(hidden_width, hidden_width))  # W_attn
        nn.init.xavier_uniform_(self.attention)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(hidden_width)

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
