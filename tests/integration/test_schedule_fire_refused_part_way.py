"""A schedule's tick fired while Redis refuses one of the commands schedule_fire.lua runs:
an ACL changed at run time (issue 29). Redis refuses a command inside a script as the
script comes to it and keeps the writes made before.

schedule_fire.lua moved the tick on first: a refusal after it (HSETNX, DEL, RPUSH,
HSET) left the schedule armed at its next tick and the run of this one never queued
(lost), or queued it without noting it in fired. The tick moves on last now, and every
command after the run's push has run in that call before it: a refused call leaves the
tick armed and its run unqueued, and the next fire, the ACL back, queues that tick's
run once. A test-owned redis-server; a worker in this thread on a manual clock (it
retries a refused fire with backoff: the ACL is given back once it said the refusal)."""
from __future__ import annotations

import logging
import threading
from typing import Any, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import own_server  # noqa: F401 (a fixture)
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.refused_part_way import plain_and_limited
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = queue_keys("fireacl", "default")
#: Each command schedule_fire.lua runs once its checks passed (and a read or two).
COMMANDS = ["zadd", "hsetnx", "hset", "del", "rpush", "ltrim", "hget", "hexists", "zscore"]

RUNS: List[int] = []


def _app(broker: Any, clock: ManualClock) -> Minitask:
    app = Minitask("fireacl", broker=broker, clock=clock)

    @app.task(name="beat")
    def beat() -> str:
        RUNS.append(clock.now_ms())
        return "beat"

    return app


@pytest.fixture
def apps(server: RedisServer) -> Iterator[Tuple[Minitask, Minitask, "redis.Redis[bytes]"]]:
    """The app that adds the schedule (the default user), the worker's app (user
    ``limited``, every command allowed until a test takes one away), an admin client."""
    RUNS.clear()
    with plain_and_limited(server, _app) as apps:
        yield apps


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_tick_fired_while_a_command_is_refused_runs_once_when_it_is_back(
        apps: Tuple[Minitask, Minitask, "redis.Redis[bytes]"], command: str,
        overlap: bool) -> None:
    owner, worker_app, admin = apps
    owner.add_schedule("every-minute", "beat", every=60.0, overlap=overlap)
    worker = worker_app.worker(queues=["default"], burst=True)
    worker.starting()
    drain(worker)  # the schedules read, the first tick armed
    assert RUNS == []
    worker_app.clock.advance(61)  # the first tick is due
    refused = threading.Event()
    handler = logging.Handler()
    handler.emit = lambda record: refused.set() if "refused" in record.getMessage() else None
    outages = logging.getLogger("minitask.worker.outages")
    outages.addHandler(handler)

    def give_back() -> None:
        refused.wait(timeout=30)  # (drain() ended without a refusal: set in finally)
        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")

    admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
    restorer = threading.Thread(target=give_back, daemon=True)
    restorer.start()
    try:
        drain(worker)  # refused part way, retried until the ACL is back
    finally:
        refused.set()
        restorer.join(timeout=30)
        outages.removeHandler(handler)
    drain(worker)  # the tick's run, once
    assert len(RUNS) == 1, RUNS
    worker_app.clock.advance(60)  # the next tick: its own run, once
    drain(worker)
    drain(worker)
    assert len(RUNS) == 2, RUNS
    assert admin.hlen(K.messages) == 0
    assert admin.llen(K.ready[9 - 5]) == 0  # no second entry of a run
