"""A broadcast subscriber cursor planted past the log's last call sequence (no pull
wrote it) loses no call: a send sets it back before its calls take their sequences,
or the subscriber's own pull does, and the worker says so once in its log. Before,
the next call took the planted cursor's number, counted as pulled: it never ran on
that subscriber, the send deleted it, and ``join()`` said it never would have an
outcome, with nothing in the worker's log. A real worker process subscribes, on a
real redis-server."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 30.0
NEWS = queue_keys("foreign", "news")
SAID = "was past the last call sequence"


def _subscribe(processes: Processes, server: RedisServer, client: "redis.Redis[bytes]",
               name: str, log: Path, pool: str = "thread") -> None:
    processes.worker("tests.apps.foreign", "-Q", "news", "--pool", pool, "-c", "1",
                     "--name", name, env={"MINITASK_BROKER_URL": server.url}, log=log)
    wait_until(lambda: client.hexists(NEWS.broadcast("cursors"), name),
               timeout=DEADLINE, message=f"{name} subscribed")


def _seq(client: "redis.Redis[bytes]") -> int:
    return int(client.hget(NEWS.broadcast("state"), "seq") or 0)


def _plant(client: "redis.Redis[bytes]", name: str, ahead: int) -> None:
    client.hset(NEWS.broadcast("cursors"), name, _seq(client) + ahead)


def _said(log: Path) -> List[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if SAID in line]


@pytest.mark.parametrize("ahead", [1, 3, 5, 0])
def test_a_cursor_planted_ahead_takes_no_call(processes: Processes, server: RedisServer,
                                              ahead: int, tmp_path: Path) -> None:
    client: "redis.Redis[bytes]" = server.client()
    producer = build(server.url)
    log = tmp_path / "worker.log"
    try:
        _subscribe(processes, server, client, "sub1", log)
        hear = producer.tasks["hear"]
        assert hear.delay(0).join(timeout=DEADLINE) == {"sub1": 0}
        _plant(client, "sub1", ahead)  # 0: the last sequence exactly, a cursor in range
        for n in range(1, ahead + 3):
            assert hear.delay(n).join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": n}
        assert int(client.hget(NEWS.broadcast("cursors"), "sub1") or 0) == _seq(client)
        if ahead:
            wait_until(lambda: _said(log), timeout=DEADLINE, message="the worker said it")
            assert len(_said(log)) == 1, _said(log)
            assert "minitask:{foreign:news}:bcast:cursors" in _said(log)[0]
        else:
            assert _said(log) == []
    finally:
        producer.close()
        client.close()


def test_a_cursor_planted_ahead_after_the_log_was_trimmed(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    """Calls dropped over broadcast_maxlen (a subscriber that never pulls holds them)."""
    client: "redis.Redis[bytes]" = server.client()
    sender = Minitask("foreign", broker=server.url, broadcast_maxlen=2)

    @sender.task(queue="news", broadcast=True, name="hear")
    def hear(n: int) -> int:
        return n

    log = tmp_path / "worker.log"
    try:
        _subscribe(processes, server, client, "sub1", log)
        sender.broker.broadcasts.subscribe("news", "idle", 0)  # never pulls
        for n in range(6):
            assert hear.delay(n).join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": n}
        assert int(client.hget(NEWS.broadcast("state"), "dropped") or 0) > 0
        _plant(client, "sub1", 3)
        for n in range(10, 14):
            assert hear.delay(n).join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": n}
        wait_until(lambda: _said(log), timeout=DEADLINE, message="the worker said it")
    finally:
        sender.close()
        client.close()


def test_one_bad_cursor_among_several_subscribers(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    """sub2's cursor is planted: the least place (sub1's) agrees with its cursor."""
    client: "redis.Redis[bytes]" = server.client()
    producer = build(server.url)
    logs = {name: tmp_path / f"{name}.log" for name in ("sub1", "sub2", "sub3")}
    try:
        for name, log in logs.items():
            _subscribe(processes, server, client, name, log)
        hear = producer.tasks["hear"]
        everyone = sorted(logs)
        assert hear.delay(0).join(timeout=DEADLINE, subscribers=everyone) == {
            name: 0 for name in everyone}
        _plant(client, "sub2", 1)
        for n in (1, 2, 3):
            assert hear.delay(n).join(timeout=DEADLINE, subscribers=everyone) == {
                name: n for name in everyone}
        wait_until(lambda: _said(logs["sub2"]), timeout=DEADLINE, message="sub2 said it")
        assert _said(logs["sub1"]) == [] and _said(logs["sub3"]) == []
    finally:
        producer.close()
        client.close()


def test_a_cursor_of_a_subscriber_that_never_subscribed(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    """A cursor with no index entry (as an earlier version wrote them) past the
    sequence is set back as it is indexed, not taken as where the log stands."""
    client: "redis.Redis[bytes]" = server.client()
    producer = build(server.url)
    try:
        _subscribe(processes, server, client, "sub1", tmp_path / "worker.log")
        hear = producer.tasks["hear"]
        assert hear.delay(0).join(timeout=DEADLINE) == {"sub1": 0}
        before = _seq(client)
        _plant(client, "ghost", 1_000_000)
        for n in (1, 2, 3):
            assert hear.delay(n).join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": n}
        assert _seq(client) == before + 3  # the sequence did not jump to the planted one
        assert int(client.hget(NEWS.broadcast("cursors"), "ghost") or 0) <= _seq(client)
    finally:
        producer.close()
        client.close()


def test_a_cursor_planted_ahead_takes_no_call_sent_with_adelay(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    client: "redis.Redis[bytes]" = server.client()
    producer = build(server.url)
    log = tmp_path / "worker.log"
    hear = producer.tasks["hear"]

    async def sends() -> List[Any]:
        try:
            heard = []
            for n in (0, 1, 2, 3):
                if n == 1:
                    _plant(client, "sub1", 1)
                handle = await hear.adelay(n)
                heard.append(await handle.ajoin(timeout=DEADLINE, subscribers=["sub1"]))
            return heard
        finally:
            await producer.aclose()

    try:
        _subscribe(processes, server, client, "sub1", log, pool="asyncio")
        assert asyncio.run(sends()) == [{"sub1": n} for n in (0, 1, 2, 3)]
        wait_until(lambda: _said(log), timeout=DEADLINE, message="the worker said it")
    finally:
        producer.close()
        client.close()
