"""A solo group's claim, lifted as its second task was sent (the group in its set form,
its turn claiming the same token, '+'), planted again in groups_solo: a copy of the
value minitask wrote (probe29o MEDIUM-1). The fetch's fast path for a solo group's token
(fetch.lua) took the claim as the group's and leased its first task while its ready set
and turn kept it: the finished task stayed at the head of the set, the token gone, and
the group's later tasks were never served. And the replayed claim lifted again by a
task joining its group (flow.lua's lift(): its token found) counted its task twice.
Real worker processes on a real redis-server: every task runs once, is counted once,
and a task sent to the group afterwards runs too.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable, Dict

import pytest
import redis

from minitask import Minitask
from tests.apps import fair_claims
from tests.support.fair import CLAIMS, CLAIMS_DEADLINE, claims_run, group_goes_on, serve_claims
from tests.support.fair import starts
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def _replayed(app: Minitask, client: "redis.Redis[bytes]", then_send: bool) -> Dict[str, int]:
    job = app.tasks[fair_claims.job.name]
    job.delay("G", 1)
    claim = client.hget(CLAIMS.groups_solo, "G")
    assert claim is not None
    job.delay("G", 2)  # the claim is lifted: the group in its set form
    assert client.hget(CLAIMS.groups_solo, "G") is None
    client.hset(CLAIMS.groups_solo, "G", claim)  # the replay
    expected = {"G:1": 1, "G:2": 1, "H:1": 1}
    if then_send:
        job.delay("G", 3)
        expected["G:3"] = 1
    job.delay("H", 1)  # another group runs either way
    return expected


@pytest.mark.parametrize("pool", ["thread", "process"])
@pytest.mark.parametrize("then_send", [True, False])
def test_a_replayed_solo_claim_strands_no_group(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, then_send: bool, pool: str) -> None:
    server = start_redis()
    log = tmp_path / "worker.log"
    with claims_run(server, processes, request, log, fair_claims.job) as (app, client):
        expected = _replayed(app, client, then_send)
        serve_claims(server, processes, log, pool)
        wait_until(lambda: set(expected) <= set(starts(client)), timeout=CLAIMS_DEADLINE,
                   message=f"the group's tasks {sorted(expected)} to start")
        wait_until(lambda: not client.exists(CLAIMS.messages, CLAIMS.leases, CLAIMS.flow),
                   timeout=CLAIMS_DEADLINE, message="every task to end")
        assert collections.Counter(starts(client)) == expected  # each once
        assert not client.keys("*:g:*")  # no ready set or turn left behind
        group_goes_on(app, client)  # a task sent to it afterwards runs too
        wait_until(lambda: not client.exists(CLAIMS.messages, CLAIMS.leases, CLAIMS.flow,
                                             CLAIMS.groups_solo),
                   timeout=CLAIMS_DEADLINE, message="the later task to end, no claim left")
        assert collections.Counter(starts(client)) == {**expected, "G:9": 1}


def test_a_replayed_solo_claim_lifted_again_is_counted_once(
        start_redis: Callable[..., RedisServer], processes: Processes,
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The replayed claim lifted by a task joining its group (flow.lua's lift(), here
    for a paused group's send): its task, in the set already, is counted once."""
    server = start_redis()
    log = tmp_path / "worker.log"
    with claims_run(server, processes, request, log, fair_claims.job) as (app, client):
        job = app.tasks[fair_claims.job.name]
        job.delay("G", 1)
        claim = client.hget(CLAIMS.groups_solo, "G")
        assert claim is not None
        job.delay("G", 2)
        client.hset(CLAIMS.groups_solo, "G", claim)  # the replay
        app.pause_group("default", "G")
        job.delay("G", 3)  # joins: lift() reads the replayed claim
        ready, groups = CLAIMS.groups_ready, CLAIMS.groups
        assert int(client.get(ready) or 0) == 3
        assert client.zscore(groups, "G") == 3
        assert app.resume_group("default", "G")
        serve_claims(server, processes, log, "thread")
        wait_until(lambda: {"G:1", "G:2", "G:3"} <= set(starts(client)), timeout=CLAIMS_DEADLINE,
                   message="the group's tasks to start")
        wait_until(lambda: not client.exists(CLAIMS.messages, CLAIMS.leases, CLAIMS.flow),
                   timeout=CLAIMS_DEADLINE, message="every task to end")
        assert collections.Counter(starts(client)) == {"G:1": 1, "G:2": 1, "G:3": 1}
        assert not client.keys("*:g:*")
        assert int(client.get(ready) or 0) == 0
        assert client.zscore(groups, "G") is None


def test_a_solo_groups_task_runs_past_a_turn_of_another_type(
        start_redis: Callable[..., RedisServer], processes: Processes,
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The fast path's look at the group's turn (above) reads an error from a turn of
    another type (planted): the solo group's task is served all the same, once."""
    server = start_redis()
    log = tmp_path / "worker.log"
    with claims_run(server, processes, request, log, fair_claims.job) as (app, client):
        app.tasks[fair_claims.job.name].delay("G", 1)
        client.set(CLAIMS.groups_solo.replace("groups_solo", "g:G:turn"), "planted")
        serve_claims(server, processes, log, "thread")
        wait_until(lambda: "G:1" in starts(client), timeout=CLAIMS_DEADLINE,
                   message="the solo group's task to start")
        wait_until(lambda: not client.exists(CLAIMS.messages, CLAIMS.leases, CLAIMS.flow),
                   timeout=CLAIMS_DEADLINE, message="the task to end")
        assert starts(client) == ["G:1"]
