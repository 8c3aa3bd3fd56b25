"""A chord whose group state says that what follows the group joins the group itself
(planted in Redis, probe 19 H1) ends on every pool: the member that meets the cycle is
dead-lettered naming the group's key, the chord's body ends cancelled saying why (its
``get()`` raises instead of waiting for ever), no lease is left held, and a task of
another queue runs meanwhile. Before, the walk recursed until RecursionError, the
member's dead-lettering walked into the same cycle: on the thread and asyncio pools the
member stayed "running" for ever (its lease renewed), on the process pool its child
crashed every second or so and the member ran again, without end.

Real redis-server, real worker processes (thread, process and asyncio pools).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator

import pytest
import redis

from minitask import Minitask, TaskFailed, chord
from minitask.broker.keys import queue_keys
from minitask.wire.serializer import pack_data
from tests.apps.canvas import producer
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

APP = "tests.apps.canvas"
#: How long the chord may take to end once the worker runs (its start included).
DEADLINE = 60.0
#: How soon a task of another queue runs, the cycle met or not (s).
WITHIN = 10.0


@pytest.fixture
def sent(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    app = producer(redis_server.client())
    try:
        yield app
    finally:
        app.close()


@pytest.mark.parametrize("member", ["succeeds", "fails"])
@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_group_joining_itself_ends_member_and_body_on_every_pool(
        sent: Minitask, redis_server: RedisServer, admin: "redis.Redis[bytes]",
        processes: Processes, tmp_path: Path, request: pytest.FixtureRequest, pool: str,
        member: str) -> None:
    tasks = sent.tasks
    last = tasks["canvas.add"].s(3, 4) if member == "succeeds" else tasks["canvas.boom"].s(1)
    handle = chord([tasks["canvas.add"].s(1, 2), last], tasks["canvas.total"].s()).delay()
    keys = queue_keys("canvas", "default")
    group_key = [key for key in admin.keys(keys.base + "group:*")
                 if not key.endswith(b":results")][0].decode()
    group_id = group_key.split(":group:", 1)[1]
    admin.hset(group_key, "next", pack_data(
        {"k": "join", "q": "default", "id": group_id, "i": 0, "ttl": 60_000, "a": []}, "x"))

    env: Dict[str, str] = {"MINITASK_BROKER_URL": redis_server.url, "TEST_VISIBILITY": "5"}
    log = tmp_path / f"worker-{pool}.log"
    worker = processes.worker(APP, "-Q", "default,other", "--pool", pool, "-c", "2",
                              env=env, log=log)
    try:
        other = tasks["canvas.mul"].delay(6, 7)  # queue "other"
        assert other.get(timeout=WITHIN + 30) == 42  # the worker's start included
        wait_until(lambda: handle.status() == "cancelled", DEADLINE,
                   message="the chord's body to end")
        with pytest.raises(TaskFailed, match="a cycle") as failed:
            handle.get(timeout=5)
        assert group_id in str(failed.value)
        wait_until(lambda: not admin.zrange(keys.leases, 0, -1), DEADLINE,
                   message="no member left leased ('running')")
        assert tasks["canvas.mul"].delay(2, 3).get(timeout=WITHIN) == 6
        letters = sent.dead_letters()
        assert len(letters) == 1 and "RecursionError" not in letters[0].message, letters
        seen = log.read_text(errors="replace")
        # the member that met the cycle is dead for it, naming the key (one that failed
        # on its own is dead for its error, the key in the log line about its workflow)
        assert group_key in (letters[0].message if member == "succeeds" else seen), (
            letters, seen[-4000:])
        assert "died (exit code" not in seen and "RecursionError" not in seen, seen[-4000:]
        assert worker.poll() is None, seen[-4000:]
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-8000:])
