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
from typing import Callable, Dict, List

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


def _starts(client: "redis.Redis[bytes]") -> List[str]:
    return [raw.decode() for raw in client.lrange("claims:starts", 0, -1)]


def _app(server: RedisServer) -> Minitask:
    app = Minitask("claims", broker=server.client())
    app.task(name=fair_claims.job.name, group_by="tenant")(fair_claims.job.func)
    return app


def _replayed(app: Minitask, client: "redis.Redis[bytes]", then_send: bool) -> Dict[str, int]:
    job = app.tasks[fair_claims.job.name]
    job.delay("G", 1)
    claim = client.hget(KEYS.groups_solo, "G")
    assert claim is not None
    job.delay("G", 2)  # the claim is lifted: the group in its set form
    assert client.hget(KEYS.groups_solo, "G") is None
    client.hset(KEYS.groups_solo, "G", claim)  # the replay
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
    client = server.client()
    app = _app(server)
    log = tmp_path / "worker.log"
    try:
        expected = _replayed(app, client, then_send)
        processes.worker("tests.apps.fair_claims", "--pool", pool, "-c", "2", "--loglevel",
                         "WARNING", env={"MINITASK_BROKER_URL": server.url}, log=log)
        wait_until(lambda: set(expected) <= set(_starts(client)), timeout=DEADLINE,
                   message=f"the group's tasks {sorted(expected)} to start")
        wait_until(lambda: not client.exists(KEYS.messages, KEYS.leases, KEYS.flow),
                   timeout=DEADLINE, message="every task to end")
        assert collections.Counter(_starts(client)) == expected  # each once
        assert not client.keys("*:g:*")  # no ready set or turn left behind
        # the group goes on: a task sent to it afterwards runs too
        app.tasks[fair_claims.job.name].delay("G", 9)
        wait_until(lambda: "G:9" in _starts(client), timeout=DEADLINE,
                   message="a later task of group G to start")
        wait_until(lambda: not client.exists(KEYS.messages, KEYS.leases, KEYS.flow,
                                             KEYS.groups_solo),
                   timeout=DEADLINE, message="the later task to end, no claim left")
        assert collections.Counter(_starts(client)) == {**expected, "G:9": 1}
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()


def test_a_replayed_solo_claim_lifted_again_is_counted_once(
        start_redis: Callable[..., RedisServer], processes: Processes,
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The replayed claim lifted by a task joining its group (flow.lua's lift(), here
    for a paused group's send): its task, in the set already, is counted once."""
    server = start_redis()
    client = server.client()
    app = _app(server)
    log = tmp_path / "worker.log"
    job = app.tasks[fair_claims.job.name]
    try:
        job.delay("G", 1)
        claim = client.hget(KEYS.groups_solo, "G")
        assert claim is not None
        job.delay("G", 2)
        client.hset(KEYS.groups_solo, "G", claim)  # the replay
        app.pause_group("default", "G")
        job.delay("G", 3)  # joins: lift() reads the replayed claim
        ready, groups = KEYS.groups_ready, KEYS.groups
        assert int(client.get(ready) or 0) == 3
        assert client.zscore(groups, "G") == 3
        assert app.resume_group("default", "G")
        processes.worker("tests.apps.fair_claims", "--pool", "thread", "-c", "2",
                         "--loglevel", "WARNING", env={"MINITASK_BROKER_URL": server.url},
                         log=log)
        wait_until(lambda: {"G:1", "G:2", "G:3"} <= set(_starts(client)), timeout=DEADLINE,
                   message="the group's tasks to start")
        wait_until(lambda: not client.exists(KEYS.messages, KEYS.leases, KEYS.flow),
                   timeout=DEADLINE, message="every task to end")
        assert collections.Counter(_starts(client)) == {"G:1": 1, "G:2": 1, "G:3": 1}
        assert not client.keys("*:g:*")
        assert int(client.get(ready) or 0) == 0
        assert client.zscore(groups, "G") is None
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()


def test_a_solo_groups_task_runs_past_a_turn_of_another_type(
        start_redis: Callable[..., RedisServer], processes: Processes,
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The fast path's look at the group's turn (above) reads an error from a turn of
    another type (planted): the solo group's task is served all the same, once."""
    server = start_redis()
    client = server.client()
    app = _app(server)
    log = tmp_path / "worker.log"
    try:
        app.tasks[fair_claims.job.name].delay("G", 1)
        client.set(KEYS.groups_solo.replace("groups_solo", "g:G:turn"), "planted")
        processes.worker("tests.apps.fair_claims", "--pool", "thread", "-c", "2",
                         "--loglevel", "WARNING", env={"MINITASK_BROKER_URL": server.url},
                         log=log)
        wait_until(lambda: "G:1" in _starts(client), timeout=DEADLINE,
                   message="the solo group's task to start")
        wait_until(lambda: not client.exists(KEYS.messages, KEYS.leases, KEYS.flow),
                   timeout=DEADLINE, message="the task to end")
        assert _starts(client) == ["G:1"]
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
