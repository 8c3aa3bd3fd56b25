"""async def tasks, cancel(running=True) and the async producer, on fakeredis (and real)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List

import fakeredis
import pytest

from minitask import AsyncTask, ConfigurationError, Minitask, TaskFailed, current_task
from minitask.stores.aio import async_client_for
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain


def test_async_def_task_is_an_async_task_run_by_the_thread_pool(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        context = current_task()
        assert context is not None  # the attempt's context reaches the coroutine
        return 2 * x

    assert isinstance(double, AsyncTask)
    handle = double.delay(21)
    assert drain(app.worker()) == 1
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == 42


def test_coroutine_over_its_timeout_is_cancelled_with_time_limit_exceeded(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    cancelled: List[bool] = []

    @app.task(timeout=0.05)
    async def hangs() -> None:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    @app.task
    async def own_timeout() -> None:
        raise asyncio.TimeoutError("the task's own")

    hung, own = hangs.delay(), own_timeout.delay()
    assert drain(app.worker()) == 2
    with pytest.raises(TaskFailed) as failed:
        hung.get(timeout=1)
    assert failed.value.exc_type == "TimeLimitExceeded"
    assert cancelled == [True]
    with pytest.raises(TaskFailed) as failed:
        own.get(timeout=1)
    assert failed.value.exc_type == "TimeoutError"  # not mistaken for the time limit


def test_cancel_running_asks_only_for_a_leased_task(make_app: Callable[..., Minitask],
                                                    redis_client: Any) -> None:
    app = make_app()

    @app.task
    def work() -> None: ...

    queued, leased = work.delay(), work.delay()
    worker = app.worker()
    stream = QueueKeys("test", "default").cancels
    assert queued.cancel(running=True) is True  # not started: plainly withdrawn
    assert redis_client.xlen(stream) == 0
    job = worker.fetch()
    assert job is not None and job.task_id == leased.id
    assert leased.cancel() is False  # running: not without running=True
    assert leased.cancel(running=True) is True
    entries = redis_client.xrange(stream)
    assert [fields[b"id"] for _, fields in entries] == [leased.id.encode()]
    assert app.handle("no-such-id").cancel(running=True) is False


def test_attempt_asked_to_stop_before_it_started_ends_cancelled_not_retried(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(retries=3)
    def work() -> None:
        ran.append(1)

    handle = work.delay()
    worker = app.worker()
    job = worker.fetch()
    assert job is not None
    # what the cancel watch does on hearing the request for a prefetched task
    assert worker._runner.cancels.request(job.task_id, held=True) is False
    worker.execute(job)
    assert ran == []
    assert handle.status() == "cancelled"
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    assert failed.value.exc_type == "Cancelled"
    assert app.broker.queues.counts("default")["running"] == 0
    assert not worker.run_once()  # not retried


def test_thread_pool_task_sees_cancel_requested_and_ends_cancelled(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    seen: List[bool] = []
    worker = app.worker()

    @app.task
    def polite() -> str:
        context = current_task()
        assert context is not None
        seen.append(context.cancel_requested)
        worker._runner.cancels.request(context.id, held=True)  # as the watch would
        seen.append(context.cancel_requested)
        return "stopped early"

    handle = polite.delay()
    assert drain(worker) == 1
    assert seen == [False, True]
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    assert failed.value.exc_type == "Cancelled"


def test_recording_a_stop_keeps_the_outcome_of_an_attempt_that_finished_first(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def quick() -> int:
        return 7

    handle = quick.delay()
    worker = app.worker()
    job = worker.fetch()
    assert job is not None
    message = job.delivery.message()
    worker.execute(job)
    worker.cancelled(job, message, 0.1)  # the supervisor's kill came too late
    assert handle.get(timeout=1) == 7
    assert handle.status() == "succeeded"


def _fake_pair() -> Any:
    server = fakeredis.FakeServer()
    return fakeredis.FakeRedis(server=server), fakeredis.FakeAsyncRedis(server=server)


def test_async_producer_and_handle_share_the_blocking_layout(clock: Any) -> None:
    blocking, aio = _fake_pair()
    app = Minitask("test", broker=blocking, async_broker=aio, clock=clock)

    @app.task
    async def fetch(url: str) -> str:
        return url.upper()

    async def produce() -> List[Any]:
        first = await fetch.adelay("a")
        later = await fetch.aapply_in(60, "b")
        custom = await fetch.aapply_async(("c",), priority=9, task_id="custom")
        many = await fetch.adelay_many([("d",), ("e",)])
        statuses = [await h.astatus() for h in (first, later, custom)]
        assert await later.acancel() is True
        return [first, custom, many, statuses]

    first, custom, many, statuses = asyncio.run(produce())
    assert statuses == ["queued", "scheduled", "queued"]
    assert custom.id == "custom"
    assert drain(app.worker()) == 4  # the same messages a blocking producer writes
    assert first.get(timeout=1) == "A"

    async def follow() -> List[Any]:
        values = [await first.aget(timeout=1)] + [await h.aget(timeout=1) for h in many]
        values.append(await app.handle(custom.id).astatus())  # found by id alone
        await app.aclose()
        return values

    assert asyncio.run(follow()) == ["A", "D", "E", "succeeded"]


def test_async_producer_checks_before_sending(clock: Any) -> None:
    blocking, aio = _fake_pair()
    app = Minitask("test", broker=blocking, async_broker=aio, clock=clock)

    @app.task
    async def one(x: int) -> int:
        return x

    async def bad() -> None:
        await one.adelay(object())  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="task 'test_async.one'|one"):
        asyncio.run(bad())
    assert blocking.keys("*") == []  # nothing half-written
    with pytest.raises(ConfigurationError, match="running event loop"):
        app.async_broker()


def test_async_client_mirrors_a_url_client_and_refuses_what_it_cannot() -> None:
    app = Minitask("test", broker="redis://:secret@127.0.0.1:6390/3")
    mirrored = async_client_for(app.broker.client, app.broker.description)
    kwargs = mirrored.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == (
        "127.0.0.1", 6390, 3, "secret")
    with pytest.raises(ConfigurationError, match="async_broker"):
        async_client_for(fakeredis.FakeRedis(), "fake")
    asyncio.run(mirrored.aclose())
