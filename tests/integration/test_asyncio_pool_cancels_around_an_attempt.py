"""A task's code that cancels the asyncio pool's own task for an attempt where no task
runs (issue 29, H1): as its outcome is written, in its ``task_postrun`` hook, or in
the slot's hand-off to the next job, before that job's task began. None may leave a
slot taken or a lease held, the heartbeat renewing it for ever; on a real
redis-server, one slot (``-c 1``), so that the second task is leased as the first
one's outcome is recorded and starts in its slot."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, List

import pytest

from minitask import Minitask, TaskContext, TaskFailed
from minitask.worker.outcomes import Recorder

pytestmark = [pytest.mark.integration, pytest.mark.app("aiocancels", on="server")]

DEADLINE = 30.0


def _attempt_tasks() -> List["asyncio.Task[Any]"]:
    """The pool's asyncio tasks of the attempts (``AsyncioPool._run``) not ended."""
    return [task for task in asyncio.all_tasks() if not task.done()
            and getattr(task.get_coro(), "__qualname__", "") == "AsyncioPool._run"]


def _two_tasks(app: Minitask, postrun: Callable[..., Any],
               success: Callable[..., Any] = lambda context, value: None) -> List[Any]:
    """Run ``first`` then ``second`` in the one slot, with the hooks given; their results
    (a TaskFailed for a failure)."""
    app.on("task_postrun", postrun)
    app.on("task_success", success)

    @app.task(name="first")
    async def first() -> str:
        return "first"

    @app.task(name="second")
    async def second() -> str:
        return "second"

    handles = [first.delay(), second.delay()]
    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    outcomes: List[Any] = []
    try:
        for handle in handles:
            try:
                outcomes.append(handle.get(timeout=DEADLINE))
            except TaskFailed as failed:
                outcomes.append(failed)
        return outcomes
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive()
        assert app.broker.queues.counts("default")["running"] == 0


def test_a_cancel_in_task_postrun_leaves_the_next_job_leased_for_nobody(
        app: Minitask) -> None:
    """The next job, leased as the outcome was recorded, was lost with the cancel."""
    async def postrun(context: TaskContext, status: str, outcome: Any) -> None:
        if context.name == "first":
            this = asyncio.current_task()
            assert this is not None
            this.cancel()
            await asyncio.sleep(0)

    assert _two_tasks(app, postrun) == ["first", "second"]


def test_a_cancel_that_lands_on_the_next_attempt_is_its_failure(app: Minitask) -> None:
    """A slot's attempts run one after the other in one asyncio task: a cancel that a
    hook of the first scheduled lands on the second, begun at once (each attempt had a
    task of its own, which began again if cancelled before its first step). It is that
    attempt's failure, as any cancel of the pool's task by a task's code, or, where its
    coroutine ended in its first step (Python 3.12+ starts it eagerly) and the cancel
    came as its outcome was written, absorbed: its result. Nothing is left leased or
    running, the slot free (``_two_tasks`` checks)."""
    def postrun(context: TaskContext, status: str, outcome: Any) -> None:
        if context.name == "first":  # runs as the first attempt ends
            asyncio.get_running_loop().call_soon(lambda: [
                task.cancel() for task in _attempt_tasks()])

    first, second = _two_tasks(app, postrun)
    assert first == "first"
    assert second == "second" or (isinstance(second, TaskFailed)
                                  and "cancelled by code other than" in str(second))


def test_a_cancel_as_the_outcome_is_written_lets_the_attempt_end_its_way(
        app: Minitask) -> None:
    """The outcome written, the attempt's task_postrun hooks ran all the same."""
    heard: List[str] = []
    loop: Dict[str, asyncio.AbstractEventLoop] = {}

    def prerun(context: TaskContext) -> None:  # on the pool's loop
        loop["it"] = asyncio.get_running_loop()

    async def postrun(context: TaskContext, status: str, outcome: Any) -> None:
        heard.append(f"{context.name} {status}")

    def success(context: TaskContext, value: Any) -> None:  # in a recording thread
        if context.name != "first":
            return
        cancelled = threading.Event()

        def cancel() -> None:
            for task in _attempt_tasks():
                task.cancel()
            cancelled.set()

        loop["it"].call_soon_threadsafe(cancel)
        assert cancelled.wait(DEADLINE)  # lands while the outcome is being written

    app.on("task_prerun", prerun)
    assert _two_tasks(app, postrun, success) == ["first", "second"]
    assert heard == ["first succeeded", "second succeeded"]


def test_a_cancel_before_the_task_runs_fails_the_attempt_through_a_second_cancel(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled in its task_prerun hook, the attempt fails (dead: no retries); a
    second cancel as that failure is written changes nothing."""
    loop: Dict[str, asyncio.AbstractEventLoop] = {}

    async def prerun(context: TaskContext) -> None:
        loop["it"] = asyncio.get_running_loop()
        if context.name == "first":
            for task in _attempt_tasks():
                task.cancel()
            await asyncio.sleep(0)

    finish = Recorder.finish

    def finishing(recorder: Recorder, job: Any, message: Any, *args: Any) -> Any:
        if message.task == "first":  # in a recording thread: cancel it again, and wait
            cancelled = threading.Event()

            def cancel() -> None:
                attempts = _attempt_tasks()
                assert attempts  # the first attempt's, recording its failure
                for task in attempts:
                    task.cancel()
                cancelled.set()

            loop["it"].call_soon_threadsafe(cancel)
            assert cancelled.wait(DEADLINE)
        return finish(recorder, job, message, *args)

    monkeypatch.setattr(Recorder, "finish", finishing)
    app.on("task_prerun", prerun)
    first, second = _two_tasks(app, lambda context, status, outcome: None)
    assert isinstance(first, TaskFailed) and first.exc_type == "RuntimeError"
    assert "'first': its attempt was cancelled by code other than minitask's" in first.message
    assert second == "second"
    assert [dead.task_id for dead in app.dead_letters()] == [first.task_id]
