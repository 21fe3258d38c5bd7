"""Sliding-window attention, "cs" (Wang, Wang and Shen, CCL 2024, eq. 18).

A token attends only to the tokens at most `attention_window` tokens away, in training
and prediction, so that a sentence is read the same whether a neighbouring sentence is
there or not. TENER's encoder applies the window as a -inf bias on its scores; a
transformer tok2vec as a (batch, query, key) attention mask over wordpieces, each
wordpiece at the position of its token (special tokens just outside the content).
Not to be confused with long_docs, which cuts long docs into pieces a model can take.
"""

from typing import Optional, TypeVar

ArrayT = TypeVar("ArrayT")  # a numpy array or a torch tensor: the same operators work on both


def check_window(window: Optional[int], where: str) -> None:
    """attention_window is null (whole doc) or a number of tokens >= 0."""
    if window is not None and not window >= 0:
        raise ValueError(f"{where} attention_window must be >= 0 or null, got {window}.")


def allowed_keys(positions: ArrayT, query_mask: ArrayT, window: int) -> ArrayT:
    """Which keys each query may attend to, (batch, query, key) bool.

    positions (batch, length): the token position of each query and key.
    query_mask (batch, length) bool: the real (not padding) positions. Padding queries
        keep every key: a row of the softmax with no key left would make NaNs that the
        zero attention weights on padding could not cancel (0 * NaN). Blocking padding
        keys is the caller's attention mask's job.
    window (int): The most tokens a key may be away from its query.
    """
    near = abs(positions[:, :, None] - positions[:, None, :]) <= window
    return near | ~query_mask[:, :, None]
