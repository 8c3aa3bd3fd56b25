"""The asyncio pool's recording threads end only once no attempt can hand them a step:
a step is never left unrun with its attempt awaiting it (review L7)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

from minitask.worker.pools import coroutines
from minitask.worker.pools.coroutines import AsyncioPool, RecordingThreads


def test_a_step_handed_after_close_fails_at_once_rather_than_never_ending() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    recording = RecordingThreads(loop, 2)
    try:
        assert asyncio.run_coroutine_threadsafe(_step(recording, 1), loop).result(10) == 1
        recording.close()
        late = asyncio.run_coroutine_threadsafe(_step(recording, 2), loop)
        with pytest.raises(RuntimeError, match="recording threads have ended"):
            late.result(timeout=10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


async def _step(recording: RecordingThreads, value: int) -> Any:
    return await recording.run(lambda: value)


def test_close_while_a_task_blocks_the_loop_runs_the_step_it_hands_later(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop cannot stop while a task's code blocks it; close() gives up waiting
    for it after CANCEL_WAIT. The step the attempt hands once unblocked still runs."""
    monkeypatch.setattr(coroutines, "CANCEL_WAIT", 0.2)
    none: Any = None
    pool = AsyncioPool(2, none, none, none)
    started, unblock, ran = threading.Event(), threading.Event(), threading.Event()

    async def attempt() -> None:
        started.set()
        unblock.wait(10)  # blocks the loop, as a task's code may
        await pool._recording.run(ran.set)

    handed: "concurrent.futures.Future[None]" = asyncio.run_coroutine_threadsafe(
        attempt(), pool._loop)
    try:
        # (blocking the loop before close(): on a loaded machine the loop could stop
        # before it ever started the attempt, which then handed no step)
        assert started.wait(10), "the attempt never started"
        pool.close()  # returns: the loop did not stop within CANCEL_WAIT
        unblock.set()
        assert ran.wait(10), "the step handed after close() never ran"
        pool._thread.join(timeout=10)
        assert not pool._thread.is_alive(), "the loop's thread ends once its loop stops"
    finally:
        unblock.set()
        pool._thread.join(timeout=10)
        handed.cancel()
        if not pool._loop.is_closed() and not pool._thread.is_alive():
            pool._loop.close()


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt])
def test_a_callback_raising_a_base_exception_does_not_end_the_loop(raised: type) -> None:
    """asyncio lets SystemExit and KeyboardInterrupt out of run_forever(): the loop's
    thread ran no more attempts (nor ended the recording threads)."""
    none: Any = None
    pool = AsyncioPool(1, none, none, none)

    def raises() -> None:
        raise raised("from a callback")

    async def answer() -> int:
        return 42

    try:
        pool._loop.call_soon_threadsafe(raises)
        assert asyncio.run_coroutine_threadsafe(answer(), pool._loop).result(10) == 42
    finally:
        pool.close()
    assert not pool._thread.is_alive()
