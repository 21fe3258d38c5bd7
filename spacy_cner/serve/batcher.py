"""The micro-batcher: texts of concurrent requests gathered into one nlp.pipe call.

Requests put their texts in one queue; a single worker takes up to `max_batch` of them, waiting at most
`max_wait` seconds after the first for more, and runs the batch in a thread of its own (the event loop
keeps reading requests meanwhile, which fill the next batch). The queue is bounded: a request whose texts
would take it past `max_queue` is refused at once (Overloaded, with a retry delay from the recent
throughput) rather than held in memory. One batch runs at a time: nlp.pipe's own threads (torch's) use
the cores.
"""

import asyncio
import collections
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Deque, List, Optional, Sequence, Tuple


class Overloaded(Exception):
    """The queue has no room for a request's texts: answer 503, retry after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Closed(Exception):
    """The batcher is shutting down and takes no more texts."""


class _Request:
    """One request's texts as they come back from their batches."""

    __slots__ = ("future", "results", "remaining")

    def __init__(self, future: "asyncio.Future", n_items: int):
        self.future = future
        self.results: List[Any] = [None] * n_items
        self.remaining = n_items


class MicroBatcher:
    """Gathers the items of concurrent `submit` calls into batches for `process`.

    process (Callable[[List[Any]], List[Any]]): One batch of items to their results, in order (run in a
        worker thread; nlp.pipe over the texts).
    max_batch (int): The most items in one call of process.
    max_wait (float): Seconds to wait, after the first item of a batch, for more to fill it.
    max_queue (int): The most items waiting or in a batch; beyond it submit raises Overloaded.
    on_batch (Optional[Callable[[List[Any], float], None]]): Called with each batch and its seconds (metrics).
    """

    def __init__(
        self,
        process: Callable[[List[Any]], List[Any]],
        *,
        max_batch: int = 64,
        max_wait: float = 0.005,
        max_queue: int = 1024,
        on_batch: Optional[Callable[[List[Any], float], None]] = None,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1 (items per batch), not {max_batch}.")
        if max_wait < 0:
            raise ValueError(f"max_wait must be 0 or more seconds, not {max_wait}.")
        if max_queue < max_batch:
            raise ValueError(f"max_queue ({max_queue}) must be at least max_batch ({max_batch}).")
        self.process = process
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.max_queue = max_queue
        self.on_batch = on_batch
        # Items waiting or in the running batch: what the queue bound counts.
        self.pending = 0
        self._items: Deque[Tuple[Any, _Request, int]] = collections.deque()
        self._wakeup: Optional[asyncio.Event] = None
        self._worker: Optional["asyncio.Task"] = None
        self._executor: Optional[ThreadPoolExecutor] = None
        self._closing = False
        # Items per second over the recent batches (the retry delay's estimate).
        self._rate = 0.0

    async def start(self) -> None:
        """Start the worker (in the running event loop)."""
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nlp.pipe")
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def run_now(self, items: List[Any]) -> List[Any]:
        """process(items) in the worker thread, outside the queue (the warm-up before the batcher serves)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.process, items)

    async def submit(self, items: Sequence[Any]) -> List[Any]:
        """The results of items, once the batches holding them have run.

        Raises Overloaded where the queue has no room for them, Closed once close() was called.
        """
        if self._closing or self._worker is None:
            raise Closed("the server is shutting down")
        if self.pending + len(items) > self.max_queue:
            raise Overloaded(
                f"the queue is full ({self.pending} texts waiting, the limit is {self.max_queue}): retry later",
                self.retry_after(),
            )
        if not items:
            return []
        request = _Request(asyncio.get_running_loop().create_future(), len(items))
        self.pending += len(items)
        self._items.extend((item, request, index) for index, item in enumerate(items))
        self._wakeup.set()
        return await request.future

    def retry_after(self) -> int:
        """Whole seconds until the queue as it is now would have run, at the recent rate (at least 1)."""
        if self._rate <= 0:
            return 1
        return max(1, math.ceil(self.pending / self._rate))

    async def close(self) -> None:
        """Take no more items, finish those queued (their requests are in flight), stop the worker."""
        self._closing = True
        if self._worker is not None:
            self._wakeup.set()
            await self._worker
            self._worker = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._items:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            await self._fill(loop)
            batch = [self._items.popleft() for _ in range(min(self.max_batch, len(self._items)))]
            start = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self.process, [item for item, _, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"the batch of {len(batch)} texts gave {len(results)} results")
            except Exception as err:  # every request of the batch gets the error; the worker goes on
                self.pending -= len(batch)
                for _, request, _ in batch:
                    if not request.future.done():
                        request.future.set_exception(err)
                continue
            seconds = time.perf_counter() - start
            self.pending -= len(batch)
            if seconds > 0:
                rate = len(batch) / seconds
                self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
            if self.on_batch is not None:
                self.on_batch([item for item, _, _ in batch], seconds)
            for (_, request, index), result in zip(batch, results):
                request.results[index] = result
                request.remaining -= 1
                if request.remaining == 0 and not request.future.done():
                    request.future.set_result(request.results)

    async def _fill(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait up to max_wait after the first item for the batch to fill (not once closing: drain)."""
        deadline = loop.time() + self.max_wait
        while len(self._items) < self.max_batch and not self._closing:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                return
