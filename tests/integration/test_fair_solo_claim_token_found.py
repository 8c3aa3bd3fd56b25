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
from typing import Callable, Dict

import pytest
import redis

from minitask import Minitask
from tests.apps import fair_claims
from tests.support.fair import CLAIMS, claims_run, group_goes_on, run_to_the_end, serve_claims
from tests.support.fair import starts
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

POOLS = ["process", "thread", "asyncio"]
REMOVED = f"removed the field G of {CLAIMS.groups_solo}"


def _plant_with_token(client: "redis.Redis[bytes]", task_id: str) -> None:
    """A claim for group G of the shape minitask writes naming ``task_id`` (default
    priority, 5), and its token at the tail of that priority's ready list."""
    client.hset(CLAIMS.groups_solo, "G", f"7.7:5{task_id}")
    client.rpush(CLAIMS.ready[9 - 5], b"\xff7.7:5" + task_id.encode() + b"\xffG")


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


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lifted_solo_claim_strands_no_group_and_runs_each_task_once(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, case: str, pool: str) -> None:
    log = tmp_path / "worker.log"
    with claims_run(logged_server, processes, request, log, fair_claims.job) as (app, client):
        expected = CASES[case](app, client)
        serve_claims(logged_server, processes, log, pool)
        run_to_the_end(client, expected, started=f"{len(expected)} tasks")
        assert collections.Counter(starts(client)) == expected  # each once
        assert not client.keys("*:g:*")
        group_goes_on(app, client)  # a task sent to it afterwards runs too
        if case in LEGIT:  # a claim minitask wrote is never removed
            assert REMOVED not in (tmp_path / "redis.log").read_text(errors="replace")
