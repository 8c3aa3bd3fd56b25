"""enqueue_now.lua, the one script call of a plain ``delay()``: it is the only call
made when it can serve one, and where it cannot (a delayed task due, an id pending
already) the queue ends as enqueue.lua alone leaves it. Keys of another type are
proven in test_hardening_redis.py, through the same ``delay()``.

Runs on fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Tuple

import pytest

from minitask import Minitask
from minitask.keys import QueueKeys
from minitask.serializer import decode_message

from tests.conftest import ManualClock, RedisServer

DEADLINE = 60.0


def _spy(app: Minitask) -> List[Tuple[str, Any]]:
    """Every script call the app's transport makes from now on, as (name, reply)."""
    made: List[Tuple[str, Any]] = []
    transport = app.broker.transport
    run_calls = transport.run_calls

    def recording(calls: Any, *args: Any, **kwargs: Any) -> Any:
        replies = run_calls(calls, *args, **kwargs)
        made.extend((call[0], reply) for call, reply in zip(calls, replies))
        return replies

    transport.run_calls = recording  # type: ignore[method-assign]
    return made


def test_a_plain_delay_is_one_call_that_writes_what_enqueue_writes(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    q = QueueKeys(app.name, "default")
    client = app.broker.transport.client
    job.delay(0)  # registers the queue
    client.rpush(q.result("again"), b"an outcome of an earlier run of this id")
    made = _spy(app)
    handle = job.apply_async((1,), task_id="again", priority=7)
    assert made == [("enqueue_now", 1)]
    assert client.lrange(q.ready[2], 0, -1) == [b"again"]  # priority 7's list
    assert decode_message(client.hget(q.messages, "again")).args == [1]
    assert client.exists(q.result("again")) == 0  # pending again: the old outcome is gone
    assert client.llen(q.wake) == 2
    assert client.zcard(q.delayed) == 0 and client.hlen(q.order) == 0
    assert handle.status() == "queued"


def test_an_id_pending_already_is_left_as_it_is_in_one_call(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    q = QueueKeys(app.name, "default")
    client = app.broker.transport.client
    job.apply_async((1,), task_id="once")
    made = _spy(app)
    job.apply_async((2,), task_id="once")
    assert made == [("enqueue_now", 0)]
    assert client.lrange(q.ready[4], 0, -1) == [b"once"]
    assert decode_message(client.hget(q.messages, "once")).args == [1]
    assert client.llen(q.wake) == 1


def test_a_delayed_task_due_before_a_delay_still_starts_first(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    q = QueueKeys(app.name, "default")
    client = app.broker.transport.client
    first = job.apply_in(1, 1)
    high = job.apply_async((2,), priority=9, delay=1.5)
    clock.advance(2)
    made = _spy(app)
    later = job.delay(3)
    # enqueue_now is handed one ready list: it leaves the promotion to enqueue.lua
    assert made == [("enqueue_now", -1), ("enqueue", 1)]
    assert client.lrange(q.ready[4], 0, -1) == [first.id.encode(), later.id.encode()]
    assert client.lrange(q.ready[0], 0, -1) == [high.id.encode()]
    assert client.zcard(q.delayed) == 0 and client.hlen(q.order) == 0
    worker = app.worker(burst=True)
    worker.run()
    assert [first.get(timeout=1), high.get(timeout=1), later.get(timeout=1)] == [1, 2, 3]


def test_a_delayed_task_not_yet_due_stays_put_and_costs_no_second_call(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    q = QueueKeys(app.name, "default")
    client = app.broker.transport.client
    scheduled = job.apply_in(1, 1)
    clock.advance(0.999)
    made = _spy(app)
    now = job.delay(2)
    assert made == [("enqueue_now", 1)]
    assert client.lrange(q.ready[4], 0, -1) == [now.id.encode()]
    assert client.zrange(q.delayed, 0, -1) == [scheduled.id.encode()]


@pytest.mark.integration
def test_the_async_producer_takes_the_same_path(redis_server: RedisServer) -> None:
    admin = redis_server.client()
    admin.flushall()
    clock = ManualClock()
    app = Minitask("enqueue-now-async", broker=redis_server.url, clock=clock)

    @app.task
    def job(n: int) -> int:
        return n

    q = QueueKeys(app.name, "default")
    scheduled = job.apply_in(1, 1)
    clock.advance(2)

    async def send() -> Tuple[str, str, str]:
        try:
            later = await job.adelay(2)  # the due task first: enqueue_now, then enqueue
            again = await job.adelay(3)  # enqueue_now alone
            same = await job.aapply_async((4,), task_id=again.id)  # pending: left as it is
            return later.id, again.id, same.id
        finally:
            await app.aclose()

    try:
        later, again, same = asyncio.run(asyncio.wait_for(send(), DEADLINE))
        assert same == again
        assert admin.lrange(q.ready[4], 0, -1) == [scheduled.id.encode(), later.encode(),
                                                   again.encode()]
        assert admin.zcard(q.delayed) == 0
        assert decode_message(admin.hget(q.messages, again) or b"").args == [3]
    finally:
        app.close()
        admin.close()
