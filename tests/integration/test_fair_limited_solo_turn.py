"""A limited solo group's turn planted on (probe32 H2): a task with limits
(``group_max_running=1``) alone in its group is held only in its group's token, a
'/' claim in ``flow:g:<group>:turn``'s ``tok``. That key deleted, its ``tok``
deleted, overwritten (another task's claim, another generation of its own, junk) or
the key of another type: before, the popped token was dropped as stale and its task
stayed queued for ever, silently (status "1 ready in 1 group(s)"), even after later
sends to the group ran (flow.lua's serve(): strayed() rescued only plain ':' tokens).
Now the task rejoins its group's set (counted once), the group gets a new token and
Redis's log names the task, the group and the turn key. Real worker processes on a
real redis-server: every task runs exactly once, another group's run alongside, a
later send to the group runs too, and nothing of the groups is left behind (their
counts included).
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable, Dict, Iterator, Tuple

import pytest
import redis

from minitask import Minitask
from tests.apps import fair_claims
from tests.support.fair import (CLAIMS, CLAIMS_DEADLINE, claims_drained, group_goes_on,
                                serve_claims, starts)
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Bound on each wait (s), on a loaded machine.
DEADLINE = CLAIMS_DEADLINE
TURN = CLAIMS.fair_group("G", "turn")

Plant = Callable[["redis.Redis[bytes]", str, str], None]


def _other_task_claim(client: "redis.Redis[bytes]", own: str, other: str) -> None:
    client.hset(TURN, "tok", f"7.7/5{other}")  # H's task, in G's claim


PLANTS: Dict[str, Plant] = {
    "turn deleted": lambda client, own, other: client.delete(TURN),
    "tok deleted": lambda client, own, other: client.hdel(TURN, "tok"),
    "tok of another task": _other_task_claim,
    "tok of a task that does not exist": lambda client, own, other: client.hset(
        TURN, "tok", "7.7/5ghost"),
    "tok of its own task, another generation": lambda client, own, other: client.hset(
        TURN, "tok", f"7.7/5{own}"),
    "tok of its own task, in its set form": lambda client, own, other: client.hset(
        TURN, "tok", f"+7.7/5{own}"),
    "tok junk": lambda client, own, other: client.hset(TURN, "tok", "zzz"),
    "tok binary": lambda client, own, other: client.hset(TURN, "tok", b"\xff\xfe\x00"),
    "tok a number": lambda client, own, other: client.hset(TURN, "tok", "12345"),
    "turn of another type": lambda client, own, other: (client.delete(TURN),
                                                        client.set(TURN, "foreign")),
}


def _limited_job(app: Minitask) -> None:
    app.task(name=fair_claims.job.name, group_by="tenant",
             group_max_running=1)(fair_claims.job.func)


@pytest.fixture(name="limited")
def limited_producer(logged_server: RedisServer, processes: Processes, tmp_path: Path,
                     request: pytest.FixtureRequest
                     ) -> Iterator[Tuple[Minitask, "redis.Redis[bytes]"]]:
    """A producer of tests/apps/fair_claims.py's ``job`` with ``group_max_running=1``
    and a client of the server; after, the workers killed (their log printed if the
    test failed)."""
    client = logged_server.client()
    app = Minitask("claims", broker=logged_server.client())
    _limited_job(app)
    try:
        yield app, client
    finally:
        log = tmp_path / "worker.log"
        if did_fail(request) and log.exists():
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()


def _leftovers(client: "redis.Redis[bytes]") -> Dict[str, str]:
    """The queue's group keys and counts left (a quarantined ``:foreign`` copy aside)."""
    return {key.decode(): client.type(key).decode() for key in client.keys("*")
            if (b":g:" in key or b"groups" in key) and b":foreign" not in key}


# every plant on the thread pool; two on the process pool (the pool does not matter
# to the script)
@pytest.mark.parametrize("plant, pool", [(plant, "thread") for plant in sorted(PLANTS)]
                         + [("turn deleted", "process"), ("tok junk", "process")])
def test_a_limited_solo_groups_task_runs_whatever_its_turn_holds(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        limited: Tuple[Minitask, "redis.Redis[bytes]"], plant: str, pool: str) -> None:
    app, client = limited
    job = app.tasks[fair_claims.job.name]
    own = job.delay("G", 0)
    other = job.delay("H", 0)  # another limited solo group, untouched
    assert client.hget(TURN, "tok").decode().endswith("/5" + own.id)  # held in its claim
    PLANTS[plant](client, own.id, other.id)
    serve_claims(logged_server, processes, tmp_path / "worker.log", pool)
    wait_until(lambda: {"G:0", "H:0"} <= set(starts(client)), timeout=DEADLINE,
               message="group G's planted-on task and group H's to start")
    wait_until(lambda: claims_drained(client) and not _leftovers(client),
               timeout=DEADLINE, message="every task to end and its group to go")
    group_goes_on(app, client)  # a later send to the group runs too
    wait_until(lambda: claims_drained(client) and not _leftovers(client),
               timeout=DEADLINE, message="the later task to end and its group to go")
    assert collections.Counter(starts(client)) == {"G:0": 1, "H:0": 1, "G:9": 1}
    text = (tmp_path / "redis.log").read_text(errors="replace")
    if plant != "turn of another type":
        said = f"minitask: task {own.id} of group G was held by a token"
        assert said in text and TURN in text, text[-3000:]
    else:
        assert f"{TURN}:foreign" in text, text[-3000:]
    assert other.id not in text  # the other group's task is not named: untouched


def test_a_limited_solo_groups_task_is_counted_once_it_rejoins(
        logged_server: RedisServer, limited: Tuple[Minitask, "redis.Redis[bytes]"]) -> None:
    """Status's count: the task rejoined is counted once (before, it stayed counted as
    "1 ready in 1 group(s)" with nothing to run); a fetch serves it, leaving none."""
    app, client = limited
    job = app.tasks[fair_claims.job.name]
    own = job.delay("G", 0)
    client.delete(TURN)
    assert int(client.get(CLAIMS.groups_ready) or 0) == 1
    found = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000,
                                    count=2, max_deliveries=5)
    if not found.deliveries:  # the stale token's fetch puts the task back: the next serves it
        found = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(),
                                        lease_ms=30_000, count=2, max_deliveries=5)
    assert [d.task_id for d in found.deliveries] == [own.id]
    assert int(client.get(CLAIMS.groups_ready) or 0) == 0
    assert not client.zscore(CLAIMS.groups, "G")
