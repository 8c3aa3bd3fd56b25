"""``run_coroutine``: an attempt's coroutine on a loop of its own, whose end is bounded.
The value is taken when the coroutine ends; what it left on the loop is cancelled and
gets ``LEFTOVER_WAIT`` (never past the time limit), then is abandoned with one warning
naming the task. ``asyncio.run`` waited for it all without limit (issue 29)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, AsyncIterator, List

import pytest

from minitask.worker.coroutine_runs import LEFTOVER_WAIT, run_coroutine

#: What a run may take past ``LEFTOVER_WAIT`` on a loaded machine.
SLACK = 2.0
NEVER = threading.Event()


def _warnings(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "minitask.worker.coroutine_runs" and r.levelno == logging.WARNING]


async def _stubborn(steps: List[int]) -> None:
    while True:
        try:
            await asyncio.sleep(0.01)
            steps.append(1)
        except asyncio.CancelledError:
            pass


def test_nothing_left_ends_at_once_with_no_thread_and_no_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    async def quick() -> int:
        await asyncio.sleep(0)
        return 7
    before = threading.active_count()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert run_coroutine(quick(), "quick", None) == 7
    assert time.monotonic() - started < SLACK
    assert threading.active_count() == before
    assert not _warnings(caplog)


def test_a_task_that_swallows_its_cancellation_is_abandoned_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    steps: List[int] = []

    async def leaves() -> str:
        asyncio.get_running_loop().create_task(_stubborn(steps))
        await asyncio.sleep(0)
        return "returned"
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert run_coroutine(leaves(), "leaves", None) == "returned"
    assert time.monotonic() - started < LEFTOVER_WAIT + SLACK
    [said] = _warnings(caplog)
    assert "'leaves'" in said and "_stubborn" in said
    seen = len(steps)
    NEVER.wait(0.1)
    assert len(steps) == seen  # abandoned: never run again


def test_a_leftover_that_blocks_when_cancelled_holds_no_more_than_the_bound(
        caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    async def blocks() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            release.wait(30)  # a blocking call: its loop is held

    async def leaves() -> str:
        asyncio.get_running_loop().create_task(blocks())
        await asyncio.sleep(0)
        return "returned"
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING):
            assert run_coroutine(leaves(), "blocks", None) == "returned"
        assert time.monotonic() - started < LEFTOVER_WAIT + SLACK
        [said] = _warnings(caplog)
        assert "blocking call" in said
    finally:
        release.set()


def test_a_well_behaved_leftover_and_an_async_generator_clean_up(
        caplog: pytest.LogCaptureFixture) -> None:
    cleaned: List[str] = []

    async def background() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append("task")

    async def numbers() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            await asyncio.sleep(0)
            cleaned.append("generator")

    async def leaves() -> int:
        asyncio.get_running_loop().create_task(background())
        async for number in numbers():
            return number  # the generator is left suspended
        return 0
    with caplog.at_level(logging.WARNING):
        assert run_coroutine(leaves(), "tidy", None) == 1
    assert sorted(cleaned) == ["generator", "task"]
    assert not _warnings(caplog)


def test_a_call_left_in_the_default_executor_is_named_and_not_waited_for(
        caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    async def leaves() -> str:
        asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
        return "returned"
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING):
            assert run_coroutine(leaves(), "executor", None) == "returned"
        assert time.monotonic() - started < LEFTOVER_WAIT + SLACK
        [said] = _warnings(caplog)
        assert "default executor" in said and "asyncio_0" in said
    finally:
        release.set()


def test_leftovers_never_hold_an_attempt_past_its_time_limit() -> None:
    async def leaves() -> str:
        asyncio.get_running_loop().create_task(_stubborn([]))
        await asyncio.sleep(0)
        return "returned"
    limit = 0.5
    started = time.monotonic()
    assert run_coroutine(leaves(), "limited", limit) == "returned"
    assert time.monotonic() - started < limit


@pytest.mark.parametrize("error", [ValueError("bad"), KeyboardInterrupt(), SystemExit(3)])
def test_what_the_coroutine_raises_is_raised(error: BaseException) -> None:
    async def raises() -> None:
        asyncio.get_running_loop().create_task(_stubborn([]))
        await asyncio.sleep(0)
        raise error
    with pytest.raises(type(error)):
        run_coroutine(raises(), "raises", None)


def test_a_task_factory_of_the_tasks_code_does_not_touch_the_unwinding() -> None:
    def refuses(loop: Any, coro: Any, **kwargs: Any) -> Any:
        coro.close()
        raise RuntimeError("no tasks here")

    async def installs() -> str:
        loop = asyncio.get_running_loop()
        loop.create_task(_stubborn([]))
        loop.set_task_factory(refuses)
        return "returned"
    started = time.monotonic()
    assert run_coroutine(installs(), "factory", None) == "returned"
    assert time.monotonic() - started < LEFTOVER_WAIT + SLACK


def test_an_async_generator_that_will_not_close_is_abandoned_in_bounded_time(
        caplog: pytest.LogCaptureFixture) -> None:
    async def clings() -> AsyncIterator[int]:
        try:
            yield 1
        finally:
            while True:  # its clean-up never ends, cancelled or not
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    pass

    kept: List[Any] = []

    async def leaves() -> int:
        numbers = clings()
        kept.append(numbers)  # still referenced: closed by the loop's shutdown
        return await numbers.__anext__()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert run_coroutine(leaves(), "clings", None) == 1
    assert time.monotonic() - started < LEFTOVER_WAIT + SLACK
    [said] = _warnings(caplog)
    assert "'clings'" in said
