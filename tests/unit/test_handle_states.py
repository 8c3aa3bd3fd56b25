"""ready(), successful(), failed() and forget() in every state a task can be in, and
their async twins answering the same (on one fakeredis server, two clients)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, Iterator, Tuple

import fakeredis
import pytest

from minitask import Minitask, ResultTimeout, TaskFailed, TaskHandle
from tests.support.clock import ManualClock
from tests.support.draining import drain

#: state -> (status, ready, successful, failed, what forget() answers, status after it)
EXPECTED: Dict[str, Tuple[str, bool, bool, bool, bool, str]] = {
    "queued": ("queued", False, False, False, False, "queued"),
    "scheduled": ("scheduled", False, False, False, False, "scheduled"),
    "running": ("running", False, False, False, False, "running"),
    "retrying": ("retrying", False, False, False, False, "retrying"),
    "succeeded": ("succeeded", True, True, False, True, "unknown"),
    # a dead task's dead letter stays for operators: it still reads failed
    "dead": ("failed", True, False, True, True, "failed"),
    "cancelled": ("cancelled", True, False, True, True, "unknown"),
    "unknown": ("unknown", False, False, False, False, "unknown"),
}


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.integration)])
def pair_app(request: pytest.FixtureRequest, clock: ManualClock) -> Iterator[Minitask]:
    """An app with a blocking and an async client, on fakeredis or on the suite's
    redis-server (where the async client sends script calls packed ahead of time)."""
    if request.param == "fake":
        server = fakeredis.FakeServer()
        made = Minitask("test", broker=fakeredis.FakeRedis(server=server),
                        async_broker=fakeredis.FakeAsyncRedis(server=server), clock=clock)
    else:
        request.getfixturevalue("admin")  # empties the server
        made = Minitask("test", broker=request.getfixturevalue("redis_server").url,
                        clock=clock)
    try:
        yield made
    finally:
        made.close()


def _in_state(app: Minitask, clock: ManualClock, state: str) -> TaskHandle[Any]:
    @app.task(retries=0)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(retries=0)
    def breaks() -> None:
        raise RuntimeError("broken")

    @app.task(retries=2, retry_backoff=60)
    def flaky() -> None:
        raise RuntimeError("not yet")

    if state == "queued":
        return add.delay(1, 2)
    if state == "scheduled":
        return add.apply_in(60, 1, 2)
    handle: TaskHandle[Any]
    if state == "running":
        handle = add.delay(1, 2)
        fetched = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                          count=1, max_deliveries=5)
        assert fetched is not None
        return handle
    if state == "retrying":
        handle = flaky.delay()
    elif state == "succeeded":
        handle = add.delay(1, 2)
    elif state == "dead":
        handle = breaks.delay()
    elif state == "cancelled":
        handle = add.delay(1, 2)
        assert handle.cancel() is True
        return handle
    else:
        return app.handle("never-sent")
    drain(app.worker(burst=True))
    return handle


def _sync(app: Minitask, handle: TaskHandle[Any]) -> Tuple[Any, ...]:
    answers = (handle.status(), handle.ready(), handle.successful(), handle.failed())
    return (*answers, handle.forget(), handle.status())


def _async(app: Minitask, handle: TaskHandle[Any]) -> Tuple[Any, ...]:
    async def ask() -> Tuple[Any, ...]:
        try:
            answers = (await handle.astatus(), await handle.aready(),
                       await handle.asuccessful(), await handle.afailed())
            return (*answers, await handle.aforget(), await handle.astatus())
        finally:
            await app.aclose()
    return asyncio.run(ask())


@pytest.mark.parametrize("ask", [_sync, _async], ids=["sync", "async"])
@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_each_state_answers_as_documented_in_both_twins(
        pair_app: Minitask, clock: ManualClock, state: str,
        ask: Callable[[Minitask, TaskHandle[Any]], Tuple[Any, ...]]) -> None:
    handle = _in_state(pair_app, clock, state)
    # rebuilt from its id alone, as another process would
    assert ask(pair_app, pair_app.handle(handle.id)) == EXPECTED[state]


def test_ready_is_successful_or_failed_in_every_state(pair_app: Minitask,
                                                      clock: ManualClock) -> None:
    for status, ready, successful, failed, _, _ in EXPECTED.values():
        assert ready == (successful or failed), status


def test_forget_drops_the_result_and_progress_of_an_ended_task(
        pair_app: Minitask, clock: ManualClock) -> None:
    handle = _in_state(pair_app, clock, "succeeded")
    keys = pair_app.broker.results.keys("default")
    client = pair_app.broker.client
    client.set(keys.progress(handle.id), b"x")
    assert handle.get(timeout=1) == 3
    assert handle.forget() is True
    assert client.exists(keys.result(handle.id), keys.progress(handle.id)) == 0
    with pytest.raises(ResultTimeout, match="unknown"):
        handle.get(timeout=1)
    assert handle.forget() is False  # nothing left to drop


def test_forget_leaves_a_task_that_may_still_run_exactly_as_it_was(
        pair_app: Minitask, clock: ManualClock) -> None:
    handle = _in_state(pair_app, clock, "running")
    client = pair_app.broker.client
    before = {key: client.dump(key) for key in client.keys("*")}
    assert handle.forget() is False
    assert {key: client.dump(key) for key in client.keys("*")} == before
    # the worker's outcome is still recorded and read
    pair_app.broker.results.ack("default", handle.id, None, 0)
    assert pair_app.broker.queues.counts("default")["running"] == 0


def test_a_forgotten_dead_task_still_raises_from_its_dead_letter_record(
        pair_app: Minitask, clock: ManualClock) -> None:
    handle = _in_state(pair_app, clock, "dead")
    with pytest.raises(TaskFailed, match="broken"):
        handle.get(timeout=1)
    assert handle.forget() is True
    assert handle.status() == "failed" and handle.failed()
