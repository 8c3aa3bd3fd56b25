"""A workflow step sent by a worker (the next step of a chain, a chord's members and its
group, a step with limits or a group of a fair queue) while Redis refuses one of the
commands the spawn scripts run: an ACL changed at run time (issue 29). Redis refuses a
command inside a script as the script comes to it and keeps the writes made before.

spawn.lua and spawn_flow.lua wrote a step's "sent" marker first: a refusal after it
(HSET, PEXPIRE, DEL, RPUSH...) left the marker, the call made again (the worker's
retry, a redelivery) skipped the step as sent, and the workflow never went on (its
step's message stranded, or the step ended "cancelled" as lost). The marker is
written last now, and every command after a step's push has run before it in that
step: a refused call leaves the step unsent, and the call made again once the ACL is
back sends it once. A test-owned redis-server; the worker's store is called directly
(a refused call raises: persist() would retry it for ever), then a worker in this
thread drains the queue and each step is seen to run exactly once."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask, chain, chord
from minitask.broker.keys import queue_keys
from minitask.stores.workflow_reads import frame_of
from minitask.wire.serializer import decode_message
from tests.support.acl import own_server  # noqa: F401 (a fixture)
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.refused_part_way import plain_and_limited, refused_part_way
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = queue_keys("spawnacl", "default")
#: Each write command a spawn script may run (spawn.lua, spawn_flow.lua with
#: flow.lua's join, spawn_group.lua), and a read or two.
COMMANDS = ["hsetnx", "hset", "pexpire", "del", "rpush", "zadd", "incr", "exists",
            "hincrby", "sadd", "hexists", "ltrim"]

RUNS: "Counter[Tuple[Any, ...]]" = Counter()


def _app(broker: Any, clock: ManualClock) -> Minitask:
    app = Minitask("spawnacl", broker=broker, clock=clock)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        RUNS["add", x, y] += 1
        return x + y

    @app.task(name="total")
    def total(values: List[int]) -> int:
        RUNS["total", tuple(values)] += 1
        return sum(values)

    @app.task(name="limited", max_running=1)
    def limited(x: int, y: int) -> int:
        RUNS["limited", x, y] += 1
        return x + y

    @app.task(name="fair", group_by="tenant")
    def fair(x: int, tenant: str = "a") -> int:
        RUNS["fair", x, tenant] += 1
        return x * 10

    return app


#: A workflow's first step is add(1, 1) = 2; then what follows it, its result, and the
#: runs each of those steps must have made (exactly one).
WORKFLOWS: Dict[str, Tuple[Callable[[Minitask], Any], Any, List[Tuple[Any, ...]]]] = {
    "chain": (lambda app: chain(app.tasks["add"].si(1, 1), app.tasks["add"].s(2),
                                app.tasks["add"].s(3)),
              7, [("add", 2, 2), ("add", 4, 3)]),
    "chain_later": (lambda app: chain(app.tasks["add"].si(1, 1),
                                      app.tasks["add"].s(3).set(delay=60)),
                    5, [("add", 2, 3)]),
    "chord": (lambda app: chain(app.tasks["add"].si(1, 1),
                                chord([app.tasks["add"].s(10), app.tasks["add"].s(20)],
                                      app.tasks["total"].s())),
              34, [("add", 2, 10), ("add", 2, 20), ("total", (12, 22))]),
    "limited": (lambda app: chain(app.tasks["add"].si(1, 1), app.tasks["limited"].s(5)),
                7, [("limited", 2, 5)]),
    "fair": (lambda app: chain(app.tasks["add"].si(1, 1), app.tasks["fair"].s(tenant="a")),
             20, [("fair", 2, "a")]),
}


@pytest.fixture
def apps(server: RedisServer) -> Iterator[Tuple[Minitask, Minitask, "redis.Redis[bytes]"]]:
    """The producer (the default user), the worker's app (user ``limited``, every
    command allowed until a test takes one away) and an admin client."""
    RUNS.clear()
    with plain_and_limited(server, _app) as apps:
        yield apps


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", sorted(WORKFLOWS))
def test_a_step_sent_while_a_command_is_refused_is_sent_once_when_it_is_back(
        apps: Tuple[Minitask, Minitask, "redis.Redis[bytes]"], kind: str,
        command: str) -> None:
    producer, worker_app, admin = apps
    build, expected, steps = WORKFLOWS[kind]
    handle = build(producer).delay()
    [first] = admin.lrange(K.ready[9 - 5], 0, -1)
    frame = frame_of(decode_message(admin.hget(K.messages, first)))
    assert frame is not None
    store, clock = worker_app.broker.workflows, worker_app.clock
    # a send first: its ACL check passed (asked once a client), as a worker's has
    worker_app.tasks["add"].delay(0, 0)
    # the first step ran (2); carrying its workflow on, a command is refused
    refused = refused_part_way(admin, command, lambda: store.advance(frame, 2, clock.now_ms()))
    store.advance(frame, 2, clock.now_ms())  # the worker's retry, the ACL back
    worker = worker_app.worker(queues=["default"], burst=True)
    worker.starting()
    drain(worker)  # the first step too (never acked here: it runs again, sends nothing)
    clock.advance(61)  # chain_later's step
    drain(worker)
    assert handle.get(timeout=10) == expected
    for step in steps:
        assert RUNS[step] == 1, (step, dict(RUNS))
    assert admin.hlen(K.messages) == 0  # nothing left queued (a step sent twice)
    # run in every spawn of a ready step; a later step's only RPUSH is its wake token,
    # whose refusal the spawn tolerates (lib.lua's refused: on every version)
    if command in ("hset", "del") or command == "rpush" and kind != "chain_later":
        assert refused, "the spawn was never refused"
