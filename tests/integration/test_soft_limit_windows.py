"""The soft limit ends with the call it limits: fired at every moment around the
return, it is raised in the task's code (or, for a thread, in the lines around the
call), never in what runs after the call returns: recording the outcome.

Real timers, signals and threads in this process, so not a unit test; no Redis.
"""
from __future__ import annotations

import asyncio
import random
import signal
import threading
import traceback
from types import FrameType
from typing import Any, Iterator, List, Optional, Tuple

import pytest

from minitask import SoftTimeLimitExceeded
from minitask.worker import softlimit
from minitask.worker.softlimit import call_with_alarm, call_with_posting, soft_limited
from tests.support.alarms import sigalrm_restored

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120, method="thread")]

#: Calls per test; the limits are drawn around each call's own duration.
CALLS = 400


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def bookkeeping() -> int:
    """Stands for what follows an attempt: Python code a stray exception would hit."""
    return sum(work(20) for _ in range(50))


@pytest.fixture
def alarm_handler_restored() -> Iterator[None]:
    with sigalrm_restored():
        yield


def raised_in(error: BaseException) -> List[str]:
    """The frames the exception passed, innermost last, less the signal handler."""
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    return names[:-1] if names[-1:] == ["_on_alarm"] else names


def test_the_alarm_is_raised_in_the_task_or_not_at_all(alarm_handler_restored: None) -> None:
    assert threading.current_thread() is threading.main_thread()
    rng = random.Random(33)
    outcomes = {"returned": 0, "interrupted": 0}
    for _ in range(CALLS):
        n = rng.randrange(0, 400)
        try:
            value = call_with_alarm(work, (n,), {}, rng.uniform(1e-6, 1e-4), "jobs.tight")
        except SoftTimeLimitExceeded as exc:
            where = raised_in(exc)
            assert where[-1] == "work", f"raised outside the task's code: {where}"
            outcomes["interrupted"] += 1
        else:
            assert value == work(n)
            outcomes["returned"] += 1
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), "the timer outlived its call"
        bookkeeping()  # would raise, were anything left to ring
    print(outcomes)


def test_an_alarm_that_finds_the_caller_itself_rings_again_later(
        alarm_handler_restored: None) -> None:
    """Between arming and the call, or between the return and the clearing, the
    handler raises nothing and sets the timer again (the clearing then stops it).
    The handler's timer is a recording stand-in: a real one, re-armed for 5 ms, rang
    in the test's own frames on a loaded machine (once, on Python 3.13)."""
    caller: List[Optional[FrameType]] = []

    def catch_frame() -> None:
        import sys
        caller.append(sys._getframe(1))

    call_with_alarm(catch_frame, (), {}, 30.0, "jobs.frame")
    armed: List[Tuple[int, float, Optional[FrameType]]] = []

    class Signals:
        ITIMER_REAL = signal.ITIMER_REAL

        @staticmethod
        def setitimer(which: int, seconds: float) -> None:
            import sys
            armed.append((which, seconds, sys._getframe(1)))

    real = softlimit.signal
    softlimit.signal = Signals  # type: ignore[assignment]
    softlimit._Alarm.error = softlimit.soft_error("jobs.frame", 1.0)
    try:
        softlimit._on_alarm(signal.SIGALRM, caller[0])
        assert softlimit._Alarm.error is not None, "kept for the task's code"
        assert [a[:2] for a in armed] == [(signal.ITIMER_REAL, softlimit.ALARM_RETRY)], \
            "rings again soon"
        # a ring that comes while the handler itself runs (re-arming) does the same
        handler = armed[0][2]
        assert handler is not None and handler.f_code is softlimit._on_alarm.__code__
        softlimit._on_alarm(signal.SIGALRM, handler)
        assert softlimit._Alarm.error is not None, "kept for the task's code"
        assert [a[:2] for a in armed[1:]] == [(signal.ITIMER_REAL, softlimit.ALARM_RETRY)], \
            "rings again soon"
        with pytest.raises(SoftTimeLimitExceeded):
            softlimit._on_alarm(signal.SIGALRM, None)  # in the task's code: raised, once
        softlimit._on_alarm(signal.SIGALRM, None)
        assert len(armed) == 2, "nothing armed once raised"
    finally:
        softlimit.signal = real
        softlimit._Alarm.error = None


def test_a_posted_exception_never_outlives_its_call() -> None:
    rng = random.Random(34)
    errors: List[BaseException] = []

    def calls() -> None:
        try:
            for _ in range(CALLS // 2):
                n = rng.randrange(0, 400)
                try:
                    value = call_with_posting(work, (n,), {}, rng.uniform(1e-5, 5e-4),
                                              "jobs.tight")
                except SoftTimeLimitExceeded as exc:
                    where = raised_in(exc)  # the task, or the wrapper's own lines
                    inside = where[where.index("call_with_posting") + 1:]
                    assert set(inside) <= {"work", "_post"}, where
                    assert exc.task_name == "jobs.tight" and "jobs.tight" in str(exc)
                    assert type(exc).__name__ == "SoftTimeLimitExceeded", "its recorded exc_type"
                else:
                    assert value == work(n)
                bookkeeping()
        except BaseException as exc:  # noqa: B902 - reported to the test's thread
            errors.append(exc)

    for run in (calls, calls):
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert errors == []


def test_a_coroutine_soft_limit_never_outlives_its_await() -> None:
    rng = random.Random(35)

    async def steps(n: int) -> int:
        for _ in range(n):
            await asyncio.sleep(0)
        return n

    async def main() -> None:
        for _ in range(CALLS // 2):
            n = rng.randrange(0, 30)
            try:
                assert await soft_limited(steps(n), rng.uniform(1e-5, 5e-4), "jobs.co") == n
            except SoftTimeLimitExceeded as exc:
                where = raised_in(exc)  # thrown in where steps() awaited
                assert where[-1] != "__await__" and "steps" in where, where
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            for _ in range(5):
                await asyncio.sleep(0)  # a stray cancellation would land here

    asyncio.run(main())


def test_a_cancellation_at_the_soft_limit_stays_a_cancellation() -> None:
    async def sleeper() -> Any:
        try:
            await asyncio.sleep(30)
        except SoftTimeLimitExceeded:
            return "soft"

    async def main() -> None:
        inner = asyncio.ensure_future(soft_limited(sleeper(), 0.05, "jobs.co"))
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, inner.cancel)  # due with the soft limit
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(inner, 30)

    asyncio.run(main())


def test_a_soft_limit_stops_what_asyncio_stops_on_cancellation_then_reaches_the_task() -> None:
    """Awaiting a TaskGroup's end or a gather, the group's tasks are cancelled and
    awaited first; the coroutine then catches the soft limit, not a cancellation."""
    log: List[str] = []

    async def child(name: str) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.append(f"{name} cancelled")
            raise

    async def grouped() -> str:
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(child("a"))
                tasks.create_task(child("b"))
        except SoftTimeLimitExceeded as exc:
            return f"caught {exc.task_name}"
        return "not stopped"

    async def gathered() -> str:
        try:
            await asyncio.gather(child("c"), child("d"))
        except SoftTimeLimitExceeded:
            return "caught"
        return "not stopped"

    async def main() -> None:
        assert await soft_limited(grouped(), 0.05, "jobs.group") == "caught jobs.group"
        assert sorted(log) == ["a cancelled", "b cancelled"], log
        assert await soft_limited(gathered(), 0.05, "jobs.gather") == "caught"
        assert sorted(log)[2:] == ["c cancelled", "d cancelled"], log
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0

    asyncio.run(main())


def test_a_soft_limit_a_coroutine_lets_escape_is_a_failure_not_a_cancellation() -> None:
    async def sleeper() -> None:
        await asyncio.sleep(30)

    async def main() -> None:
        attempt = asyncio.ensure_future(soft_limited(sleeper(), 0.05, "jobs.co"))
        with pytest.raises(SoftTimeLimitExceeded) as raised:
            await asyncio.wait_for(attempt, 30)
        assert not attempt.cancelled()
        assert not isinstance(raised.value, asyncio.CancelledError)
        assert type(raised.value) is SoftTimeLimitExceeded
        assert raised_in(raised.value)[-1] == "sleep", "its traceback shows where it waited"

    asyncio.run(main())
