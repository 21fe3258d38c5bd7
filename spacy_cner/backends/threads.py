"""torch's intra-op threads while a component predicts.

Why components set them around their own calls instead of leaving torch's default (one thread per core): the
packages' networks at prediction are small products and element-wise steps (a BiLSTM, LAC's BiGRU, a CRF), each
too small for threads to pay, and every one of torch's parallel regions waits at a barrier for all its threads.
On a machine where other processes hold cores, a thread that lost its core keeps the others spinning there, and
a pipeline with torch's default ran several times slower than on one thread; on a free machine more threads
gained little, and on some pipelines lost. torch.set_num_threads is process-wide, so the caller's count is put
back after each call (a torch model of the user's own, run between two calls, keeps its threads).
"""

import contextlib
from typing import Any, Iterator, Optional

import torch


def check_threads(threads: Optional[int], owner: str) -> Optional[int]:
    """threads if it is None (the process's setting) or a positive int, else a ValueError naming owner."""
    if threads is None or (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
        return threads
    raise ValueError(
        f"{owner}: torch_threads must be a positive number of threads, or null to leave torch's own setting "
        f"(torch.set_num_threads), got {threads!r}."
    )


@contextlib.contextmanager
def torch_threads(threads: Optional[int]) -> Iterator[None]:
    """Run the block on `threads` of torch's intra-op threads (None: as they are), then restore the caller's."""
    previous = torch.get_num_threads()
    if threads is None or threads == previous:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class TorchThreadsSetting:
    """A component's `torch_threads` attribute, kept in its cfg (saved with it, as crf_ner's precision) and checked
    when set: the threads its calls run on (None: the process's). A descriptor, so that crf_ner and lac_tagger
    share one definition."""

    def __get__(self, pipe: Any, owner: Any = None) -> Any:
        if pipe is None:
            return self
        return pipe.cfg.get("torch_threads", 1)

    def __set__(self, pipe: Any, value: Optional[int]) -> None:
        pipe.cfg["torch_threads"] = check_threads(value, pipe.name)
