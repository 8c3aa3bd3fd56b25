"""No data planted in a queue's keys is known to make the fetch script raise a runtime
error (one other than its refusals of a key of another type, which name it): this
searches for one, planting values of every type in every key the fetch path reads
(its own keys, a flow spec, a group's keys, weights, limits), on the suite's own
redis-server. A runtime error it would meet sets only its queue aside
(tests/integration/test_script_error_sets_one_queue_aside.py)."""
from __future__ import annotations

from typing import Any, Iterator, List, Tuple

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

Q = QueueKeys("junk", "default")
#: Every key the fetch path reads, of the queue and of its groups and limiters.
KEYS = [Q.delayed, Q.leases, Q.messages, Q.deliveries, Q.wake, Q.dead, *Q.ready, Q.cancelled,
        Q.order, Q.flow, Q.flow_due, Q.flow_limiters, Q.flow_parked, Q.groups, Q.groups_ready,
        Q.groups_paused, Q.groups_weight, Q.retrying,
        *(Q.fair_group(group, part) for group in ("A", "B")
          for part in ("ready", "turn", "running", "starts", "pace"))]
VALUES = [b"x", b"", b"1e400", b"nan", b"-inf", b"inf", b"9223372036854775808", b"\xff\xfe",
          b"1.5", b"-1", b"0", b"3:job:tenant\n", b"1\n2\n3\n4\n5\n6\n7\n8\n9\n", b"\xff1\xffA",
          b"5abc", b"9" * 40]
SCORES = [0.0, 1.5, -1.0, 1e300, 9e15, float("inf"), float("-inf"), 2e14]
KINDS = ["string", "list", "hash", "set", "zset", "stream", "field", "member"]

Planting = Tuple[str, str, bytes, float]


@pytest.fixture(scope="module")
def client(redis_server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    connection = redis_server.client()
    try:
        yield connection
    finally:
        connection.close()


def plant(client: "redis.Redis[bytes]", key: str, kind: str, value: bytes,
          score: float) -> None:
    if kind not in ("field", "member"):
        client.delete(key)
    try:
        if kind == "string":
            client.set(key, value)
        elif kind == "list":
            client.rpush(key, value)
        elif kind in ("hash", "field"):
            fields = client.hkeys(key) if client.type(key) == b"hash" else []
            client.hset(key, fields[0] if fields and kind == "field" else value or b"A", value)
        elif kind == "set":
            client.sadd(key, value)
        elif kind in ("zset", "member"):
            client.zadd(key, {value or b"m": score})
        else:
            client.xadd(key, {"a": value})
    except redis.ResponseError:
        pass  # a field or member added to a key of another type: as it is


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(plantings=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(KINDS),
                                    st.sampled_from(VALUES), st.sampled_from(SCORES)),
                          min_size=1, max_size=3),
       advance=st.sampled_from([0, 2, 100]), count=st.sampled_from([1, 5]))
def test_no_planted_data_makes_the_fetch_script_raise_a_runtime_error(
        client: "redis.Redis[bytes]", plantings: List[Planting], advance: int,
        count: int) -> None:
    client.flushall()  # the suite's own server
    clock = ManualClock()
    app = Minitask("junk", broker=client, clock=clock)

    @app.task(group_by="tenant", name="grouped", group_max_running=2)
    def grouped(tenant: str, n: int) -> None:
        return None

    @app.task(name="limited", max_running=3, rate_limit="5/s")
    def limited(n: int) -> None:
        return None

    grouped.delay_many([("A", n) for n in range(3)] + [("B", n) for n in range(2)])
    limited.delay(1)
    grouped.apply_async(("A", 9), delay=1)
    limited.apply_async((2,), expires=1)
    for key, kind, value, score in plantings:
        plant(client, key, kind, value, score)
    clock.advance(advance)
    for _ in range(3):
        try:
            app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=1000,
                                    count=count, max_deliveries=3)
        except BrokerError as exc:
            said: Any = str(exc)
            # a key of another type is refused by name (WRONGTYPE): anything else is a
            # runtime error of the script
            assert "WRONGTYPE" in said or "minitask key" in said, said
            break
        clock.advance(1)
