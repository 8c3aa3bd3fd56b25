"""What a grouped task's send costs Redis, and that the send's inline join of a plain
task to a new group (enqueue_group.lua, without flow.lua's library) writes what
flow.lua's join writes. Counts, not times (``INFO commandstats``, the script calls
themselves left out): nothing here depends on the machine's speed or load.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer


def _commands(client: "redis.Redis[bytes]") -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[8:]: int(stat["calls"]) for name, stat in stats.items()
            if name.startswith("cmdstat_")}


def _spent(client: "redis.Redis[bytes]", before: Dict[str, int]) -> int:
    after = _commands(client)
    return sum(calls - before.get(name, 0) for name, calls in after.items()
               if name not in ("evalsha", "eval", "info", "script|load"))


@pytest.fixture
def fresh(redis_server: RedisServer, clock: ManualClock) -> Callable[..., Any]:
    client = redis_server.client()
    made: List[Minitask] = []

    def make() -> Tuple[Minitask, Any, "redis.Redis[bytes]"]:
        client.flushall()
        app = Minitask("sendcosts", broker=redis_server.client(), clock=clock)
        made.append(app)

        @app.task(group_by="tenant", name="job", ignore_result=True)
        def job(tenant: str, n: int) -> None:
            pass

        return app, job, client

    yield make
    for app in made:
        app.close()


@pytest.mark.integration
def test_a_grouped_send_to_a_new_group_runs_fifteen_commands(
        fresh: Callable[..., Any]) -> None:
    # the checks (messages, flow, the group's ready set and turn, its groups_solo
    # field, the token's list), the due read, whether its id is pending, its result
    # key's DEL and spec, the paused lookup, the group's claim (groups_solo: its one
    # key), token, the message (last: a send refused part way is sent again, issue 29)
    # and the wake token: 15 (17 while a solo group had a turn, a cancelled entry for
    # its token, a groups entry and a count)
    app, job, client = fresh()
    job.delay("t0", 0)  # the script loaded, the keys made
    spent = []
    for n in range(1, 6):
        before = _commands(client)
        job.delay(f"t{n}", n)
        spent.append(_spent(client, before))
    assert spent == [15] * 5


def _state(client: "redis.Redis[bytes]", now: bytes) -> Dict[bytes, Any]:
    """Every key but the paused groups' and the messages', by kind, the send's `now`
    in tokens and claims written as NOW."""
    found: Dict[bytes, Any] = {}
    for key in sorted(client.keys("*")):
        if key.endswith(b"groups_paused") or key.endswith(b"messages"):
            continue
        kind = client.type(key)
        if kind == b"hash":
            value: Any = sorted(client.hgetall(key).items())
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"string":
            value = client.get(key)
        else:
            value = kind
        found[key] = value
    return {key: repr(value).replace(repr(now)[2:-1], "NOW") for key, value in found.items()}


@pytest.mark.integration
def test_the_inline_join_writes_what_the_librarys_join_writes(
        fresh: Callable[..., Any], clock: ManualClock) -> None:
    # a paused group anywhere in the queue sends every join through flow.lua's library;
    # with none, a plain task to a new group is joined inline: the same keys, values,
    # tokens and counts (a group's second task, and a priority, included)
    # (a's third task joins a set whose token stays; its fourth outranks the token's
    # band, and a new token is pushed; its fifth, below that band, joins)
    sends = [("a", 1, 0), ("b", 2, 7), ("a", 3, 0), ("c", 4, 9), ("a", 5, 0), ("a", 6, 5),
             ("a", 7, 3), ("b", 8, 7), ("b", 9, 7)]
    states = []
    for paused in (True, False):
        app, job, client = fresh()
        if paused:
            app.pause_group("default", "elsewhere")
        for tenant, n, priority in sends:
            job.apply_async((tenant, n), task_id=f"id{n}", priority=priority)
        states.append(_state(client, str(clock.now_ms()).encode()))
    assert states[0] == states[1]
    assert any(b"g:a:ready" in key for key in states[1])  # the second task made the set
