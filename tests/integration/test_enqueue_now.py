"""A plain ``delay()`` (a new id, ready at once) is one write of three plain commands
in MULTI/EXEC, no script (``QueueStore.push``); a call naming its id is enqueue_now.lua, the one
script call where it can serve (an id pending already is left as it is), and
enqueue.lua where it cannot. Both leave the queue as enqueue.lua alone would, but
for the promotion of due delayed tasks, which a plain ``delay()`` leaves to the next
fetch (the ordering rules, docs/explanations/guarantees.rst). Keys of another type
are proven in test_scripts_survive_foreign_data.py, through the same ``delay()``.

Runs on fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Tuple

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.wire.serializer import decode_message

from tests.support.clock import ManualClock
from tests.support.scripts import record_script_calls
from tests.support.servers import RedisServer

DEADLINE = 60.0


@dataclass
class Producer:
    """An app on ``redis_client`` with one task, ``job(n)``, of the default queue."""

    app: Minitask
    job: Any
    q: QueueKeys
    client: Any


@pytest.fixture
def producer(make_app: Callable[..., Minitask]) -> Producer:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    return Producer(app, job, QueueKeys(app.name, "default"), app.broker.transport.client)


def test_a_plain_delay_is_one_write_of_plain_commands(producer: Producer) -> None:
    job, q, client = producer.job, producer.q, producer.client
    job.delay(0)  # registers the queue
    made = record_script_calls(producer.app)
    handle = job.apply_async((1,), priority=7)
    assert made == []  # no script
    assert client.lrange(q.ready[2], 0, -1) == [handle.id.encode()]  # priority 7's list
    assert decode_message(client.hget(q.messages, handle.id)).args == [1]
    assert client.llen(q.wake) == 2
    assert client.zcard(q.delayed) == 0 and client.hlen(q.order) == 0
    assert handle.status() == "queued"
    producer.app.worker(burst=True).run()
    assert handle.get(timeout=1) == 1
    assert client.exists(q.wake) == 0  # the fetch that found the queue empty


#: A long message (a write that surely reaches Redis in parts).
LONG = 1_000


def test_a_long_plain_delay_is_one_transaction_that_writes_the_same(
        producer: Producer) -> None:
    job, q, client = producer.job, producer.q, producer.client
    job.delay(0)  # registers the queue
    made = record_script_calls(producer.app)
    handle = job.delay("x" * LONG)  # in MULTI/EXEC, as every plain delay()
    assert made == []
    assert client.lrange(q.ready[4], 0, -1)[-1] == handle.id.encode()
    assert decode_message(client.hget(q.messages, handle.id)).args == ["x" * LONG]
    assert client.llen(q.wake) == 2
    producer.app.worker(burst=True).run()
    assert handle.get(timeout=1) == "x" * LONG


def test_a_short_plain_delay_is_one_transaction_too(redis_server: RedisServer) -> None:
    """However short, the write is one MULTI/EXEC: a write can reach Redis in parts,
    and a connection cut after the message's HSET must not leave it in no list."""
    admin = redis_server.client()
    app = Minitask("enqueue-short-multi", broker=redis_server.url)
    job = app.task(name="short.noop")(lambda: None)
    try:
        job.delay()  # registers the queue (a script)
        job.delay()  # asks once whether MULTI/EXEC may be used (plain.PlainPush._ask)
        before = admin.info("commandstats").get("cmdstat_multi", {}).get("calls", 0)
        job.delay()
        after = admin.info("commandstats").get("cmdstat_multi", {}).get("calls", 0)
        assert after - before == 1
    finally:
        app.close()
        for key in admin.scan_iter("minitask:{enqueue-short-multi*"):
            admin.delete(key)


def test_a_call_naming_its_id_is_one_script_call_that_writes_what_enqueue_writes(
        producer: Producer) -> None:
    job, q, client = producer.job, producer.q, producer.client
    job.delay(0)  # registers the queue
    client.rpush(q.result("again"), b"an outcome of an earlier run of this id")
    made = record_script_calls(producer.app)
    handle = job.apply_async((1,), task_id="again", priority=7)
    assert made == [[("enqueue_now", 1)]]
    assert client.lrange(q.ready[2], 0, -1) == [b"again"]  # priority 7's list
    assert decode_message(client.hget(q.messages, "again")).args == [1]
    assert client.exists(q.result("again")) == 0  # pending again: the old outcome is gone
    assert client.llen(q.wake) == 2
    assert client.zcard(q.delayed) == 0 and client.hlen(q.order) == 0
    assert handle.status() == "queued"


def test_an_id_pending_already_is_left_as_it_is_in_one_call(producer: Producer) -> None:
    job, q, client = producer.job, producer.q, producer.client
    job.apply_async((1,), task_id="once")
    made = record_script_calls(producer.app)
    job.apply_async((2,), task_id="once")
    assert made == [[("enqueue_now", 0)]]
    assert client.lrange(q.ready[4], 0, -1) == [b"once"]
    assert decode_message(client.hget(q.messages, "once")).args == [1]
    assert client.llen(q.wake) == 1


def test_a_delayed_task_due_before_a_call_naming_its_id_still_starts_first(
        producer: Producer, clock: ManualClock) -> None:
    job, q, client = producer.job, producer.q, producer.client
    first = job.apply_in(1, 1)
    high = job.apply_async((2,), priority=9, delay=1.5)
    clock.advance(2)
    made = record_script_calls(producer.app)
    later = job.apply_async((3,), task_id="later")
    # enqueue_now is handed one ready list: it leaves the promotion to enqueue.lua
    assert made == [[("enqueue_now", -1)], [("enqueue", 1)]]
    assert client.lrange(q.ready[4], 0, -1) == [first.id.encode(), later.id.encode()]
    assert client.lrange(q.ready[0], 0, -1) == [high.id.encode()]
    assert client.zcard(q.delayed) == 0 and client.hlen(q.order) == 0
    producer.app.worker(burst=True).run()
    assert [first.get(timeout=1), high.get(timeout=1), later.get(timeout=1)] == [1, 2, 3]


def test_a_plain_delay_leaves_due_delayed_tasks_to_the_next_fetch(
        producer: Producer, clock: ManualClock) -> None:
    job, q, client = producer.job, producer.q, producer.client
    job.delay(0)  # registers the queue
    producer.app.worker(burst=True).run()
    first = job.apply_in(1, 1)
    high = job.apply_async((2,), priority=9, delay=1.5)
    clock.advance(2)
    made = record_script_calls(producer.app)
    later = job.delay(3)
    assert made == []
    assert client.lrange(q.ready[4], 0, -1) == [later.id.encode()]
    assert client.zcard(q.delayed) == 2
    assert first.status() == "scheduled" and later.status() == "queued"
    found = producer.app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                             count=3, max_deliveries=5)
    # the fetch promoted both, each behind the tasks of its priority
    assert [d.task_id for d in found.deliveries] == [high.id, later.id, first.id]


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
