"""A send with its own task_id= (ready at once, due later, an app.batch() block that
promotes a due task first, a task with limits, a fair queue's grouped tasks) while
Redis refuses one of the commands
the enqueue scripts run: an ACL changed at run time (issue 29). Redis refuses a command
inside a script as the script comes to it and keeps the writes made before.

enqueue.lua wrote a message first (HSETNX) and queued it after (DEL, then ZADD): a
refusal there left it stored in no queue, and the send made again with the same
task_id= found its id pending and queued nothing: the task never ran (enqueue_group.lua
likewise, a grouped task before it joined its group). enqueue_flow.lua wrote a task's
limits after queueing it. Now every write that queues a task comes
before the message that makes its id pending (read first), and its limits before
both: the send made again once the ACL is back queues each task once, with its limits.
A test-owned redis-server; the sender is an ACL user whose check before its first send
passed (it is asked once a client), a worker in this thread drains the queue."""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import own_server  # noqa: F401 (a fixture)
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.refused_part_way import plain_and_limited, refused_part_way
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = queue_keys("enqacl", "default")
#: Each command the enqueue scripts run (enqueue.lua with promote.lua, enqueue_now.lua,
#: enqueue_flow.lua, enqueue_group.lua with flow.lua's join): every write, and the
#: reads between them.
COMMANDS = ["hexists", "hset", "del", "rpush", "zadd", "incr", "ltrim", "zrem", "hdel",
            "llen", "zrange", "zrangebyscore", "hget", "zscore", "hincrby", "zincrby",
            "incrby", "hmget", "exists", "lpos"]

RUNS: "Counter[int]" = Counter()


def _app(broker: Any, clock: ManualClock) -> Minitask:
    app = Minitask("enqacl", broker=broker, clock=clock)

    @app.task(name="work")
    def work(x: int) -> int:
        RUNS[x] += 1
        return x

    @app.task(name="limited", max_running=1)
    def limited(x: int) -> int:
        RUNS[x] += 1
        return x

    @app.task(name="fair", group_by="tenant")
    def fair(x: int, tenant: str = "a") -> int:
        RUNS[x] += 1
        return x

    return app


def _ready(app: Minitask) -> None:
    app.tasks["work"].apply_async((1,), task_id="ready-1")


def _later(app: Minitask) -> None:
    app.tasks["work"].apply_async((2,), task_id="later-2", delay=5)


def _batch(app: Minitask) -> None:
    with app.batch():
        app.tasks["work"].apply_async((3,), task_id="batch-3")
        app.tasks["work"].apply_async((4,), task_id="batch-4", delay=5)
        app.tasks["work"].apply_async((5,), task_id="batch-5", priority=3)


def _flow(app: Minitask) -> None:
    with app.batch():
        app.tasks["limited"].apply_async((6,), task_id="flow-6")
        app.tasks["limited"].apply_async((7,), task_id="flow-7", delay=5)


def _fair(app: Minitask) -> None:
    with app.batch():  # a new group's first task (its solo claim), a second, another group
        app.tasks["fair"].apply_async((8,), {"tenant": "a"}, task_id="fair-8")
        app.tasks["fair"].apply_async((9,), {"tenant": "a"}, task_id="fair-9")
        app.tasks["fair"].apply_async((10,), {"tenant": "b"}, task_id="fair-10", priority=3)


#: Each send, made twice (refused, then the ACL back), and the runs it must make.
SENDS: Dict[str, Tuple[Callable[[Minitask], None], List[int]]] = {
    "ready": (_ready, [1]), "later": (_later, [2]), "batch": (_batch, [3, 4, 5]),
    "flow": (_flow, [6, 7]), "fair": (_fair, [8, 9, 10]),
}


@pytest.fixture
def apps(server: RedisServer) -> Iterator[Tuple[Minitask, Minitask, "redis.Redis[bytes]"]]:
    """The sender (user ``limited``, every command allowed until a test takes one away),
    the worker's app (the default user) and an admin client."""
    RUNS.clear()
    with plain_and_limited(server, _app) as (worker_app, sender, admin):
        yield sender, worker_app, admin


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", sorted(SENDS))
def test_a_send_refused_part_way_runs_once_when_sent_again(
        apps: Tuple[Minitask, Minitask, "redis.Redis[bytes]"], kind: str,
        command: str) -> None:
    sender, worker_app, admin = apps
    send, runs = SENDS[kind]
    clock = sender.clock
    # a send first: its ACL check passed (asked once a client); and a task due in a
    # second, which the send below promotes first (promote.lua) once it is due
    sender.tasks["work"].apply_async((0,), task_id="first-0", delay=1)
    clock.advance(2)
    refused_part_way(admin, command, lambda: send(sender), "ACL")
    send(sender)  # the caller's send made again, the ACL back: the same ids
    if kind == "flow":  # each task pending holds its limits (its spec)
        assert admin.hexists(K.flow, "flow-6") and admin.hexists(K.flow, "flow-7")
    worker = worker_app.worker(queues=["default"], burst=True)
    worker.starting()
    deadline = time.monotonic() + 30
    drain(worker)
    clock.advance(6)  # the tasks due later are due
    while sum(RUNS.values()) < len(runs) + 1 and time.monotonic() < deadline:
        drain(worker)
    drain(worker)
    assert RUNS == Counter({0: 1, **{x: 1 for x in runs}}), (kind, command, RUNS)
    assert admin.hlen(K.messages) == 0  # each acked: nothing left pending
    assert admin.zcard(K.delayed) == 0


@pytest.mark.parametrize("command", ["hexists", "rpush", "zadd", "incr", "del", "hset"])
@pytest.mark.parametrize("kind", ["ready", "later"])
def test_a_result_of_an_earlier_run_is_gone_once_the_id_is_sent_again(
        apps: Tuple[Minitask, Minitask, "redis.Redis[bytes]"], kind: str,
        command: str) -> None:
    """The message written first, a refused DEL left the result of the id's earlier
    run: the send made again found the id pending, and its handle said "succeeded"
    with the old value until the new run ended."""
    sender, worker_app, admin = apps
    send, [x] = SENDS[kind]
    task_id = {"ready": "ready-1", "later": "later-2"}[kind]
    worker = worker_app.worker(queues=["default"], burst=True)
    worker.starting()
    send(worker_app)  # its earlier run, ended: its result kept
    sender.clock.advance(6)
    drain(worker)
    assert RUNS[x] == 1 and worker_app.handle(task_id).status() == "succeeded"
    sender.tasks["work"].apply_async((0,), task_id="first-0")  # the ACL check passed
    refused_part_way(admin, command, lambda: send(sender), "ACL")
    send(sender)
    assert sender.handle(task_id).status() in ("queued", "scheduled")
    sender.clock.advance(6)
    deadline = time.monotonic() + 30
    while RUNS[x] < 2 and time.monotonic() < deadline:
        drain(worker)
    assert RUNS == Counter({0: 1, x: 2}), RUNS
