"""A workflow sent while Redis refuses the SET of its handle record: an ACL changed at
run time (issue 29). Redis refuses a command inside a script as the script comes to it
and keeps the writes made before.

spawn.lua wrote the handle and plan records after the steps: a refused SET left the
first step queued (it ran) with no record, so ``app.handle(id)`` could not rebuild the
workflow's handle in another process, and the send made again (a new id) ran the step
twice. The records come before the steps now: a refused SET sends nothing, and the send
made again once the ACL is back runs each step once, its handle rebuilt anywhere."""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Iterator, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask, chain
from minitask.broker.keys import queue_keys
from tests.support.acl import own_server  # noqa: F401 (a fixture)
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.refused_part_way import plain_and_limited, taken_away
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = queue_keys("recacl", "default")
RUNS: "Counter[Tuple[int, int]]" = Counter()


def _app(broker: Any, clock: ManualClock) -> Minitask:
    app = Minitask("recacl", broker=broker, clock=clock)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        RUNS[x, y] += 1
        return x + y

    return app


@pytest.fixture
def apps(server: RedisServer) -> Iterator[Tuple[Minitask, Minitask, "redis.Redis[bytes]"]]:
    """The sender (user ``limited``), the worker's app (the default user), an admin."""
    RUNS.clear()
    with plain_and_limited(server, _app) as (worker_app, sender, admin):
        yield sender, worker_app, admin


@pytest.mark.parametrize("later", [False, True])
def test_a_workflow_whose_record_is_refused_sends_nothing(
        apps: Tuple[Minitask, Minitask, "redis.Redis[bytes]"], later: bool) -> None:
    sender, worker_app, admin = apps
    add = sender.tasks["add"]
    sender.tasks["add"].delay(0, 0)  # a send first: its ACL check passed (asked once)
    flow = chain(add.si(1, 1).set(delay=5) if later else add.si(1, 1), add.s(2))
    with taken_away(admin, "set"), pytest.raises(BrokerError):
        flow.delay()
    assert admin.hlen(K.messages) == 1  # the first send's only: no step without its record
    handle = flow.delay()  # the send made again, the ACL back
    worker = worker_app.worker(queues=["default"], burst=True)
    worker.starting()
    sender.clock.advance(6)
    deadline = time.monotonic() + 30
    while RUNS[2, 2] < 1 and time.monotonic() < deadline:
        drain(worker)
    assert RUNS == Counter({(0, 0): 1, (1, 1): 1, (2, 2): 1}), RUNS
    assert worker_app.handle(handle.id).get(timeout=5) == 4  # rebuilt in another app
