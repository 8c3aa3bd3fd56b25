"""Every key a script that records an outcome writes to (ack, retry, bury, release,
end_cancelled), planted with each type Redis has: the outcome is recorded all the
same, and a key of another type than minitask keeps there is moved aside whole, to
``<key>:foreign``. Before, some of those calls were refused (dead, delayed,
messages, a ready list): a worker retried the refusal for ever, holding the task's
slot (issue 29, H1); others skipped the write (retrying, dead_info, order, recent),
keeping no note of the outcome. On the suite's redis-server.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterator, Tuple

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from minitask.wire.serializer import decode_message, decode_outcome
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aside"
Q = QueueKeys(APP, "default")
LEASE_MS = 60_000
PLANTED = "someone else's"

#: What each outcome script writes to, and the type minitask keeps there.
KINDS: Dict[str, str] = {
    Q.leases: "zset", Q.delayed: "zset", Q.messages: "hash", Q.deliveries: "hash",
    Q.retrying: "hash", Q.order: "hash", Q.recent: "stream", Q.dead: "zset",
    Q.dead_info: "hash", Q.wake: "list", Q.sequence: "string", Q.ready[4]: "list",
}
WRITES = {
    "ack": (Q.leases, Q.messages, Q.deliveries, Q.retrying, Q.recent),
    "retry": (Q.leases, Q.delayed, Q.messages, Q.deliveries, Q.retrying, Q.wake, Q.order,
              Q.sequence, Q.recent),
    "bury": (Q.leases, Q.delayed, Q.deliveries, Q.retrying, Q.dead, Q.dead_info, Q.order,
             Q.recent),
    "release": (Q.leases, Q.deliveries, Q.wake, Q.ready[4]),
    "cancelled": (Q.leases, Q.delayed, Q.messages, Q.deliveries, Q.retrying, Q.order,
                  Q.recent),
}
PLANTS: Dict[str, Callable[["redis.Redis[bytes]", str], Any]] = {
    "string": lambda client, key: client.set(key, PLANTED),
    "list": lambda client, key: client.rpush(key, PLANTED),
    "set": lambda client, key: client.sadd(key, PLANTED),
    "zset": lambda client, key: client.zadd(key, {PLANTED: 1}),
    "hash": lambda client, key: client.hset(key, "someone", PLANTED),
}
CASES = [(outcome, key) for outcome, keys in WRITES.items() for key in keys]


@pytest.fixture(scope="module")
def made(redis_server: RedisServer) -> Iterator[Tuple[Minitask, "redis.Redis[bytes]"]]:
    client = redis_server.client()
    app = Minitask(APP, broker=client, clock=ManualClock())

    @app.task(name="job")
    def job(n: Any) -> Any:
        return n

    app.broker.results.recent_length = 100
    try:
        yield app, client
    finally:
        app.close()
        client.close()


def held(client: "redis.Redis[bytes]", key: str) -> Tuple[str, Any]:
    """A key's type and what it holds (of the planted kinds)."""
    kind = client.type(key).decode()
    content = {"string": lambda: client.get(key), "list": lambda: client.lrange(key, 0, -1),
               "set": lambda: client.smembers(key),
               "zset": lambda: client.zrange(key, 0, -1),
               "hash": lambda: client.hgetall(key)}.get(kind, lambda: None)()
    return kind, content


def record(app: Minitask, outcome: str, task_id: str, priority: int) -> None:
    """Record ``outcome`` of the leased task through the stores, as a worker does."""
    results, now = app.broker.results, app.clock.now_ms()
    entry = results.entry(task_id, "job", "x", now, 1)
    if outcome == "ack":
        ack = results.prepare_ack("default", task_id, Outcome("succeeded", now, value=7,
                                                              attempt=1), 60_000,
                                  entry=entry)
        results.ack_many([ack])
    elif outcome == "retry":
        message = SENT[task_id]  # the worker holds the message it fetched
        results.retry("default", dataclasses.replace(message, attempt=2), now + 5_000,
                      Outcome("retrying", now, exc_type="ValueError", attempt=1), entry)
    elif outcome == "bury":
        results.bury("default", task_id, outcome=Outcome("failed", now, exc_type="ValueError"),
                     result_ttl_ms=60_000, entry=entry)
    elif outcome == "release":
        app.broker.queues.release("default", [(task_id, priority)])
    else:
        app.broker.cancels.end("default", task_id, Outcome("cancelled", now), 60_000, entry,
                               100)


SENT: Dict[str, Any] = {}


def recorded(app: Minitask, client: "redis.Redis[bytes]", outcome: str, task_id: str) -> None:
    """The outcome stands in Redis."""
    place, outcome_read = app.broker.results.state("default", task_id)
    status = decode_outcome(outcome_read).status if place == "finished" and outcome_read \
        else place
    if outcome == "ack":
        assert status == "succeeded", status
    elif outcome == "retry":
        assert client.zscore(Q.delayed, task_id) is not None
        assert client.hexists(Q.retrying, task_id)
        assert client.hexists(Q.messages, task_id)
    elif outcome == "bury":
        assert client.zscore(Q.dead, task_id) is not None
        assert client.hexists(Q.dead_info, task_id)
        assert status == "dead", status
    elif outcome == "release":
        assert task_id.encode() in client.lrange(Q.ready[4], 0, -1)
    else:
        assert status == "cancelled", status


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), planted=st.sampled_from(sorted(PLANTS)))
def test_an_outcome_is_recorded_whatever_type_its_keys_hold_and_foreign_ones_go_aside(
        made: Tuple[Minitask, "redis.Redis[bytes]"], case: Tuple[str, str],
        planted: str) -> None:
    app, client = made
    outcome, key = case
    client.flushall()
    handle = app.tasks["job"].delay("x")
    fetched = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=LEASE_MS,
                                      count=1, max_deliveries=5)
    [delivery] = fetched.deliveries
    assert delivery.task_id == handle.id
    SENT[handle.id] = decode_message(app.broker.queues.message_body("default", handle.id)
                                     or b"")
    client.delete(key)
    PLANTS[planted](client, key)
    record(app, outcome, handle.id, delivery.priority)
    foreign = key + ":foreign"
    if planted == KINDS[key]:
        assert not client.exists(foreign)
    else:
        assert held(client, foreign) == (planted, held_planted(planted))
    if key != Q.leases:  # leases of another type hold no lease: it is lost, as ever
        recorded(app, client, outcome, handle.id)
    if key == Q.recent and outcome != "release":
        assert client.xlen(Q.recent) == 1


def held_planted(kind: str) -> Any:
    return {"string": PLANTED.encode(), "list": [PLANTED.encode()],
            "set": {PLANTED.encode()}, "zset": [PLANTED.encode()],
            "hash": {b"someone": PLANTED.encode()}}[kind]
