"""The micro-batcher: concurrent submits gathered into batches, in order, bounded, drained on close."""

import asyncio
import time

import pytest

from spacy_cner.serve.batcher import Closed, MicroBatcher, Overloaded


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def recording(delay: float = 0.0):
    batches = []

    def process(items):
        batches.append(list(items))
        if delay:
            time.sleep(delay)
        return [f"<{item}>" for item in items]

    return process, batches


def test_concurrent_requests_share_a_batch_and_get_their_own_results():
    process, batches = recording()

    async def main():
        batcher = MicroBatcher(process, max_batch=64, max_wait=0.2, max_queue=64)
        await batcher.start()
        answers = await asyncio.gather(*(batcher.submit([f"t{i}a", f"t{i}b"]) for i in range(10)))
        await batcher.close()
        return answers

    answers = run(main())
    assert answers == [[f"<t{i}a>", f"<t{i}b>"] for i in range(10)]
    assert len(batches) == 1 and len(batches[0]) == 20


def test_batches_hold_at_most_max_batch_and_lose_nothing():
    process, batches = recording(delay=0.01)

    async def main():
        batcher = MicroBatcher(process, max_batch=4, max_wait=0.01, max_queue=100)
        await batcher.start()
        answers = await asyncio.gather(*(batcher.submit([i]) for i in range(30)), batcher.submit(list(range(30, 41))))
        await batcher.close()
        return answers

    answers = run(main())
    assert answers[:30] == [[f"<{i}>"] for i in range(30)]
    assert answers[30] == [f"<{i}>" for i in range(30, 41)]
    assert max(len(batch) for batch in batches) == 4
    assert sorted(item for batch in batches for item in batch) == list(range(41))  # each once


def test_a_full_queue_refuses_at_once_with_a_retry_delay():
    process, _ = recording(delay=0.2)

    async def main():
        batcher = MicroBatcher(process, max_batch=2, max_wait=0, max_queue=4)
        await batcher.start()
        first = asyncio.ensure_future(batcher.submit([1, 2, 3, 4]))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded) as caught:
            await batcher.submit([5])
        assert caught.value.retry_after >= 1
        assert "limit is 4" in str(caught.value)
        assert await first == ["<1>", "<2>", "<3>", "<4>"]
        assert await batcher.submit([5]) == ["<5>"]  # room again
        await batcher.close()

    run(main())


def test_close_finishes_the_queued_texts_then_refuses():
    process, _ = recording(delay=0.05)

    async def main():
        batcher = MicroBatcher(process, max_batch=1, max_wait=0, max_queue=10)
        await batcher.start()
        pending = [asyncio.ensure_future(batcher.submit([i])) for i in range(3)]
        await asyncio.sleep(0.01)
        await batcher.close()
        assert [task.result() for task in pending] == [["<0>"], ["<1>"], ["<2>"]]
        with pytest.raises(Closed):
            await batcher.submit([9])

    run(main())


def test_a_failing_batch_fails_its_requests_and_the_batcher_goes_on():
    def process(items):
        if "bad" in items:
            raise ValueError("bad text")
        return items

    async def main():
        batcher = MicroBatcher(process, max_batch=8, max_wait=0, max_queue=8)
        await batcher.start()
        with pytest.raises(ValueError, match="bad text"):
            await batcher.submit(["bad"])
        assert batcher.pending == 0
        assert await batcher.submit(["good"]) == ["good"]
        await batcher.close()

    run(main())


@pytest.mark.parametrize("kwargs", [{"max_batch": 0}, {"max_wait": -1}, {"max_batch": 8, "max_queue": 4}])
def test_bad_settings(kwargs):
    with pytest.raises(ValueError):
        MicroBatcher(lambda items: items, **kwargs)
