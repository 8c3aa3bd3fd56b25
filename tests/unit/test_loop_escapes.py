"""The asyncio pool finds whose code raised out of its event loop by the context the
raising callback ran in (issue 29, probe 29b F3): a child asyncio task's and a loop
callback's context is their maker's, ``current_task()`` with it. Read from asyncio's
``Handle._run`` frame in the traceback: checked here on each interpreter tested."""
from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any, List, NoReturn, Optional

import pytest

from minitask.context import TaskContext, entered, task_in
from minitask.worker.pools.escapes import Escapes, raised_in

NOW = dt.datetime.now(dt.timezone.utc)


def _context(task_id: str) -> TaskContext:
    return TaskContext(id=task_id, name="spawner", queue="default", priority=0, attempt=1,
                       enqueued_at=NOW, eta=None)


def _raise(error: BaseException) -> NoReturn:
    raise error


async def _child(error: BaseException) -> None:
    await asyncio.sleep(0)
    raise error


def _escape(loop: asyncio.AbstractEventLoop, start: Any) -> BaseException:
    """Run ``start`` as a loop callback, then the loop until something escapes it."""
    loop.call_soon(start)
    with pytest.raises(BaseException) as raised:
        loop.run_forever()
    return raised.value


@pytest.mark.parametrize("how", ["task", "callback"])
def test_the_context_of_the_code_that_raised_names_its_task(how: str) -> None:
    loop = asyncio.new_event_loop()
    children: List["asyncio.Task[None]"] = []
    mine = _context("t-1")

    def start() -> None:
        with entered(mine):  # as the pool runs an attempt's code
            if how == "task":
                children.append(loop.create_task(_child(KeyboardInterrupt("child"))))
            else:
                loop.call_soon(_raise, SystemExit(7))
    try:
        error = _escape(loop, start)
        found = raised_in(error)
        assert found is not None and task_in(found) is mine
    finally:
        loop.close()


def test_an_error_from_a_running_attempt_is_its_failure_and_cancels_its_code(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    stops: List[bool] = []
    escapes = Escapes(lambda: stops.append(True))
    mine, other = _context("t-1"), _context("t-2")
    codes: List["asyncio.Task[Any]"] = []

    def start() -> None:
        codes.append(loop.create_task(asyncio.sleep(60)))
        codes.append(loop.create_task(asyncio.sleep(60)))
        escapes.enter(mine, codes[0])
        escapes.enter(other, codes[1])
        with entered(mine):
            loop.call_soon(_raise, KeyboardInterrupt("from a callback"))
    try:
        error = _escape(loop, start)
        with caplog.at_level(logging.WARNING):
            escapes.escaped(error)
        assert escapes.leave(mine) is error
        assert escapes.leave(other) is None
        assert codes[0].cancelling() == 1 and codes[1].cancelling() == 0
        for code in codes:
            code.cancel()
        loop.run_until_complete(asyncio.wait(codes))
        assert "task 'spawner' (id t-1): code its attempt started" in caplog.text
        assert not stops
    finally:
        loop.close()


def test_an_error_after_the_attempt_ended_is_logged_naming_its_task(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    escapes = Escapes(lambda: None)
    mine = _context("t-1")

    def start() -> None:
        with entered(mine):
            loop.call_soon(_raise, KeyboardInterrupt("late"))
    try:
        error = _escape(loop, start)
        with caplog.at_level(logging.ERROR):
            escapes.escaped(error)
        assert "task 'spawner' (id t-1): code its attempt left behind" in caplog.text
        assert "KeyboardInterrupt: late" in caplog.text  # its traceback
    finally:
        loop.close()


def test_a_stop_by_a_running_attempt_fails_it_and_leaves_the_loop_running() -> None:
    stops: List[Optional[TaskContext]] = []
    escapes = Escapes(lambda: stops.append(None))
    loop = asyncio.new_event_loop()
    try:
        code = loop.create_future()
        mine = _context("t-1")
        escapes.enter(mine, code)
        with entered(mine):
            escapes.stop()
        assert not stops
        failure = escapes.leave(mine)
        assert isinstance(failure, RuntimeError) and "loop.stop()" in str(failure)
        with entered(mine):  # its attempt has ended: the loop stops, said whose code
            escapes.stop()
        assert stops == [None]
        assert escapes.said_stopped() == ("the code of task 'spawner' (id t-1) after its "
                                          "attempt ended")
        escapes.stop()
        assert escapes.said_stopped() == "code of no running task"
    finally:
        loop.close()


def test_an_error_while_its_prerun_hooks_run_is_the_attempts_failure() -> None:
    """Entered before its code is made (its ``task_prerun`` hooks run first): what
    escapes then is still its failure, nothing yet to cancel."""
    loop = asyncio.new_event_loop()
    escapes = Escapes(lambda: None)
    mine = _context("t-1")

    def start() -> None:
        escapes.enter(mine, None)
        with entered(mine):
            loop.call_soon(_raise, SystemExit(5))
    try:
        error = _escape(loop, start)
        escapes.escaped(error)
        assert escapes.leave(mine) is error
    finally:
        loop.close()
