"""A broadcast send wakes its subscribers at once though the queue's ``bcast:since``
(the index the wake tree ranks subscribers by) holds another type (issue 29, LOW).

Readers coped with such a since already, but a send's wake read it as no subscriber
and woke nobody: each subscriber pulled only at its wait's end, up to 5 s a call,
until the key was fixed. Now the wake tree ranks by the places index while since is
of another type.

On the suite's redis-server: the wake lists as a worker finds them, and a real worker
process subscribed, which runs each call well before its wait's end (5 s).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from minitask.broker.keys import lane, queue_keys
from tests.apps.broadcast import QUEUE, producer
from tests.support.broadcasts import now_ms, tick_app
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: A call woken by its send runs within this (s); one that waits for the pull at its
#: worker's wait's end comes about 5 s after the last (each is sent once the last ran).
PROMPT = 3.0
CALLS = 3


def _plant_since(client: "redis.Redis[bytes]", app_name: str, queue: str) -> None:
    since = queue_keys(app_name, queue).broadcast("since")
    client.delete(since)
    client.set(since, b"not a zset")


def test_a_send_wakes_the_lanes_with_since_of_another_type(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = tick_app(redis_server, "since-wake", "w")
    try:
        store = app.broker.broadcasts
        for name in ("s1", "s2"):
            store.subscribe("w", name, now_ms())
        _plant_since(admin, app.name, "w")
        wakes = [queue_keys(app.name, lane("w", name)).wake for name in ("s1", "s2")]
        admin.delete(*wakes)
        tick.delay(1)
        assert [admin.llen(key) for key in wakes] == [1, 1], "a subscriber was not woken"
        admin.delete(*wakes)
        tick.delay(2)  # declared now (the last send's)
        assert [admin.llen(key) for key in wakes] == [1, 1], "a subscriber was not woken"
    finally:
        app.close()


def test_a_subscribed_worker_runs_each_call_at_once_with_since_of_another_type(
        redis_server: RedisServer, processes: Processes, tmp_path: Path) -> None:
    client = redis_server.client()
    side, note, _ = producer(redis_server.url)
    marks = "marks:note:s1"
    try:
        client.delete(marks)
        processes.worker("tests.apps.broadcast", "--pool", "thread", "--name", "s1",
                         env={"MINITASK_BROKER_URL": redis_server.url,
                              "TEST_SUBSCRIBER": "s1"}, log=tmp_path / "s1.log")
        cursors = queue_keys(side.name, QUEUE).broadcast("cursors")
        wait_until(lambda: client.hexists(cursors, "s1"), timeout=DEADLINE,
                   message="the worker to subscribe")
        note.delay(0)
        wait_until(lambda: client.llen(marks) == 1, timeout=DEADLINE,
                   message="the warm-up call to run")
        _plant_since(client, side.name, QUEUE)
        took = []
        for n in range(1, CALLS + 1):
            sent = time.monotonic()
            note.delay(n)
            wait_until(lambda: client.llen(marks) == n + 1, timeout=DEADLINE, interval=0.05,
                       message=f"call {n} to run")
            took.append(time.monotonic() - sent)
        assert max(took) < PROMPT, f"calls ran {took} s after their sends: not woken"
    finally:
        side.close()
        client.close()
