"""A solo group's claim lifted as its group's second task is sent (flow.lua's lift()),
told minitask's by its token found near the tail of its ready list (owned(): one LPOS,
review29i's cost of the full checks) or, its token not found there, by the full checks.
Real worker processes on a real redis-server, on each pool: legit claims, their tokens
near the tail or far from it (a backlog of other groups sent since), are never removed
and every task runs once; a claim planted WITH a token of its own (the token found: the
claim taken) naming another group's task, or a task of the group already waiting in
its set, strands no group and runs no task twice.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps import fair_claims
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

KEYS = QueueKeys("claims", "default")
DEADLINE = 60.0
POOLS = ["process", "thread", "asyncio"]
REMOVED = f"removed the field G of {KEYS.groups_solo}"


@pytest.fixture
def logged_server(start_redis: Callable[..., RedisServer],
                  tmp_path: Path) -> Iterator[RedisServer]:
    yield start_redis("--logfile", str(tmp_path / "redis.log"), "--loglevel", "warning")


def _starts(client: "redis.Redis[bytes]") -> List[str]:
    return [raw.decode() for raw in client.lrange("claims:starts", 0, -1)]


def _app(server: RedisServer) -> Minitask:
    app = Minitask("claims", broker=server.client())
    app.task(name=fair_claims.job.name, group_by="tenant")(fair_claims.job.func)
    return app


def _plant_with_token(client: "redis.Redis[bytes]", task_id: str) -> None:
    """A claim for group G of the shape minitask writes naming ``task_id`` (default
    priority, 5), and its token at the tail of that priority's ready list."""
    client.hset(KEYS.groups_solo, "G", f"7.7:5{task_id}")
    client.rpush(KEYS.ready[9 - 5], b"\xff7.7:5" + task_id.encode() + b"\xffG")


def _pairs(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, int]:
    """Groups of two, each pair in one send: the token is the list's last entry."""
    job = app.tasks[fair_claims.job.name]
    job.delay_many([(f"P{i // 2}", i) for i in range(20)])
    return {f"P{i // 2}:{i}": 1 for i in range(20)}


def _far_token(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, int]:
    """G's token with 200 other solo groups' tokens sent behind it (past the tail
    scan): its claim is checked in full, and is found minitask's all the same."""
    job = app.tasks[fair_claims.job.name]
    job.delay("G", 0)
    job.delay_many([(f"S{i}", i) for i in range(200)])
    job.delay("G", 1)
    return {"G:0": 1, "G:1": 1, **{f"S{i}:{i}": 1 for i in range(200)}}


def _planted_other_group(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, int]:
    job = app.tasks[fair_claims.job.name]
    other = job.delay("H", 0)  # a solo group of its own: its claim and token
    _plant_with_token(client, other.id)
    job.delay("G", 1)  # joins: the planted claim is lifted (its token found)
    return {"H:0": 1, "G:1": 1}


def _planted_in_set(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, int]:
    job = app.tasks[fair_claims.job.name]
    app.pause_group("default", "G")  # its tasks wait in its ready set
    job.delay("G", 0)
    waiting = job.delay("G", 1)
    _plant_with_token(client, waiting.id)
    job.delay("G", 2)
    assert app.resume_group("default", "G")
    return {"G:0": 1, "G:1": 1, "G:2": 1}


CASES: Dict[str, Callable[[Minitask, "redis.Redis[bytes]"], Dict[str, int]]] = {
    "groups of two": _pairs,
    "a token far from the tail": _far_token,
    "planted with a token: another group's task": _planted_other_group,
    "planted with a token: a task in its set": _planted_in_set,
}
LEGIT = {"groups of two", "a token far from the tail"}


def _drained(client: "redis.Redis[bytes]") -> bool:
    return not client.exists(KEYS.messages, KEYS.delayed, KEYS.leases, KEYS.groups_solo,
                             KEYS.flow)


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lifted_solo_claim_strands_no_group_and_runs_each_task_once(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, case: str, pool: str) -> None:
    client = logged_server.client()
    app = _app(logged_server)
    log = tmp_path / "worker.log"
    try:
        expected = CASES[case](app, client)
        processes.worker("tests.apps.fair_claims", "--pool", pool, "-c", "2", "--loglevel",
                         "WARNING", env={"MINITASK_BROKER_URL": logged_server.url}, log=log)
        wait_until(lambda: set(expected) <= set(_starts(client)), timeout=DEADLINE,
                   message=f"{len(expected)} tasks to start")
        wait_until(lambda: _drained(client), timeout=DEADLINE,
                   message="every task to end and its claim and spec to go")
        assert collections.Counter(_starts(client)) == expected  # each once
        assert not client.keys("*:g:*")
        # the group goes on: a task sent to it afterwards runs too
        app.tasks[fair_claims.job.name].delay("G", 9)
        wait_until(lambda: "G:9" in _starts(client), timeout=DEADLINE,
                   message="a later task of group G to start")
        if case in LEGIT:  # a claim minitask wrote is never removed
            assert REMOVED not in (tmp_path / "redis.log").read_text(errors="replace")
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
