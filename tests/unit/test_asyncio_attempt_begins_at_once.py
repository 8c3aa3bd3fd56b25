"""An asyncio pool attempt's coroutine begins at once, in its own asyncio task, on
every Python (issue 36): on 3.12+ asyncio's ``eager_start``, on 3.11 its first step
taken off the loop's ready queue and run as the attempt is begun. A coroutine that
ends without waiting (a no-op) then costs no loop turn for its first step, nor one
more for its end's callback; the loop thread's CPU is what bounds one process's
asyncio drain (it is busy, not waiting, between round trips).
"""
from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Dict, List, Optional, Tuple

import pytest

from minitask.worker.pools.contained import begun, holder

HELD = ("tasks.noop", "id-1")
VAR: "contextvars.ContextVar[str]" = contextvars.ContextVar("begun_var", default="caller")


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts its turns (``_run_once``)."""

    turns = 0

    def _run_once(self) -> None:
        self.turns += 1
        super()._run_once()  # type: ignore[misc]


def run(main: Any) -> Tuple[Any, int]:
    loop = CountingLoop()
    try:
        return loop.run_until_complete(main()), loop.turns
    finally:
        loop.close()


def test_a_coroutine_that_never_waits_has_ended_as_it_is_begun() -> None:
    seen: Dict[str, Any] = {}

    async def noop() -> int:
        seen["task"] = asyncio.current_task()
        seen["holder"] = holder(holders, asyncio.current_task())
        VAR.set("attempt")
        return 7

    holders: Dict[Any, Tuple[str, str]] = {}

    async def main() -> Tuple[bool, Any, Any, str, Any]:
        caller = asyncio.current_task()
        task = begun(noop(), asyncio.get_running_loop(), holders, HELD)
        done = task.done()  # before this step gives the loop a turn
        return done, task, caller, VAR.get(), asyncio.current_task() is caller

    (done, task, caller, var, still_caller), _ = run(main)
    assert done, "the attempt's first step waited for a loop turn"
    assert task.result() == 7
    assert seen["task"] is task, "the coroutine ran as another task than its own"
    assert seen["task"] is not caller
    assert seen["holder"] == HELD
    assert still_caller, "the caller's task was not current again after the step"
    assert var == "caller", "the attempt's context leaked into its caller's"


def test_a_no_op_attempt_costs_no_loop_turn() -> None:
    async def noop() -> None:
        pass

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(200):
            task = begun(noop(), loop, {}, HELD)
            if not task.done():
                await task

    _, turns = run(main)
    assert turns < 20, f"{turns} loop turns for 200 no-op attempts"


def test_a_coroutine_that_waits_goes_on_as_its_task() -> None:
    steps: List[Optional[asyncio.Task[Any]]] = []

    async def waits(future: "asyncio.Future[int]") -> int:
        steps.append(asyncio.current_task())
        await asyncio.sleep(0)
        steps.append(asyncio.current_task())
        value = await future
        steps.append(asyncio.current_task())
        return value + 1

    async def main() -> Tuple[int, Any]:
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[int]" = loop.create_future()
        task = begun(waits(future), loop, {}, HELD)
        assert not task.done()
        loop.call_later(0.01, future.set_result, 41)
        return await asyncio.wait_for(task, 30.0), task

    value, task = run(main)[0]
    assert value == 42
    assert steps == [task, task, task]


def test_a_coroutine_that_raises_at_once_fails_its_task() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def main() -> "asyncio.Task[Any]":
        task = begun(fails(), asyncio.get_running_loop(), {}, HELD)
        await asyncio.wait([task], timeout=30.0)
        return task

    task = run(main)[0]
    with pytest.raises(ValueError, match="boom"):
        task.result()


def test_a_begun_task_waiting_is_cancelled_as_any() -> None:
    async def sleeps() -> None:
        await asyncio.sleep(3600)

    async def main() -> "asyncio.Task[Any]":
        task = begun(sleeps(), asyncio.get_running_loop(), {}, HELD)
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait([task], timeout=30.0)
        return task

    assert run(main)[0].cancelled()
