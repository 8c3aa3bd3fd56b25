"""A planted solo-group claim in ``flow:groups_solo`` of the right shape naming a REAL
task (probe29m, issue 29): a task of another group, one of the same group already in
its ready set, delayed or running, or one that no longer exists. Before, the claim was
trusted as soon as its task's message existed: the task was moved into the group's
set and the group's turn claimed a token that does not exist, so the next task sent
to the group stayed queued for ever (probe29m's repro, failing before on every pool). Real
worker processes on a real redis-server, on each pool: the group's later task runs,
every task runs exactly once, Redis's log names the field and the problem, and no
group key is left behind. Guards that passed before too: a ':' token planted in a
ready list for a group, naming a task of another group (flow.lua's strayed()), and a
group's turn claiming a task that runs (unsolo()) serve each task once.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable, Dict

import pytest
import redis

from minitask import Minitask
from tests.apps import fair_claims
from tests.support.fair import (CLAIMS, CLAIMS_DEADLINE, claims_drained, claims_run,
                                group_goes_on, run_to_the_end, serve_claims, starts)
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

POOLS = ["process", "thread", "asyncio"]


def _plant(client: "redis.Redis[bytes]", group: str, task_id: str) -> None:
    """A claim of the shape minitask writes (a generation, ':', a priority digit and
    an id), naming ``task_id``: task ids are sent at the default priority, 5."""
    client.hset(CLAIMS.groups_solo, group, f"7.7:5{task_id}")


def _other_group(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, str]:
    job = app.tasks[fair_claims.job.name]
    other = job.delay("H", 0)  # a solo group of its own: its claim in groups_solo
    _plant(client, "G", other.id)
    job.delay("G", 1)
    return {"H:0": "whose flow spec names group H", "G:1": ""}


def _same_group_in_set(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, str]:
    job = app.tasks[fair_claims.job.name]
    app.pause_group("default", "G")  # its tasks wait in its ready set
    job.delay("G", 0)
    waiting = job.delay("G", 1)
    _plant(client, "G", waiting.id)
    job.delay("G", 2)  # joins: the claim in groups_solo is lifted
    assert app.resume_group("default", "G")
    return {"G:0": "", "G:1": "waiting elsewhere", "G:2": ""}


def _same_group_delayed(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, str]:
    job = app.tasks[fair_claims.job.name]
    later = job.apply_async(("G", 0), delay=3)  # joins its group when due
    _plant(client, "G", later.id)
    job.delay("G", 1)
    return {"G:0": "waiting elsewhere", "G:1": ""}


def _gone(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, str]:
    _plant(client, "G", "ghost")
    app.tasks[fair_claims.job.name].delay("G", 0)
    return {"G:0": "does not exist"}


def _stray_token(app: Minitask, client: "redis.Redis[bytes]") -> Dict[str, str]:
    job = app.tasks[fair_claims.job.name]
    other = job.delay("H", 0)
    # a plain solo group's token for G, holding H's task, at the head of its list
    client.lpush(CLAIMS.ready[9 - 5], b"\xff7.7:5" + other.id.encode() + b"\xffG")
    job.delay("G", 1)
    return {"H:0": "", "G:1": ""}


CASES: Dict[str, Callable[[Minitask, "redis.Redis[bytes]"], Dict[str, str]]] = {
    "another group's task": _other_group,
    "a task in its set": _same_group_in_set,
    "a delayed task": _same_group_delayed,
    "a task that does not exist": _gone,
    "a stray token of another group's task": _stray_token,
}


def _next_beside_the_running(app: Minitask, client: "redis.Redis[bytes]",
                             plant: Callable[[str], None]) -> None:
    """Group G's gated task started (leased), ``plant`` given its id: group G's next
    task starts while the claimed one still runs; then the gated one may end."""
    running = app.tasks[fair_claims.gated.name].delay("G", 0)
    wait_until(lambda: "G:0" in starts(client), timeout=CLAIMS_DEADLINE,
               message="the gated task to start")
    plant(running.id)
    app.tasks[fair_claims.job.name].delay("G", 1)
    wait_until(lambda: "G:1" in starts(client), timeout=CLAIMS_DEADLINE,
               message="group G's next task to start")
    client.set("claims:open", 1)


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_solo_claim_naming_a_real_task_strands_no_group_and_runs_it_once(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, case: str, pool: str) -> None:
    log = tmp_path / "worker.log"
    with claims_run(logged_server, processes, request, log, fair_claims.job,
                    fair_claims.gated) as (app, client):
        expected = CASES[case](app, client)
        serve_claims(logged_server, processes, log, pool)
        run_to_the_end(client, expected, started=f"tasks {sorted(expected)}")
        counted = collections.Counter(starts(client))
        assert sorted(counted) == sorted(expected)
        assert set(counted.values()) == {1}, counted  # none ran twice
        assert not client.keys("*:g:*")
        group_goes_on(app, client)  # a task sent to it afterwards runs too
        text = (tmp_path / "redis.log").read_text(errors="replace")
        for problem in filter(None, expected.values()):
            said = f"minitask: removed the field G of {CLAIMS.groups_solo}: its claim names task"
            assert said in text and problem in text, text[-3000:]


@pytest.mark.parametrize("pool", POOLS)
def test_a_solo_claim_naming_a_running_task_of_its_group_never_runs_it_again(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, pool: str) -> None:
    log = tmp_path / "worker.log"
    with claims_run(logged_server, processes, request, log, fair_claims.job,
                    fair_claims.gated) as (app, client):
        serve_claims(logged_server, processes, log, pool)
        _next_beside_the_running(app, client, lambda task_id: _plant(client, "G", task_id))
        wait_until(lambda: claims_drained(client), timeout=CLAIMS_DEADLINE,
                   message="every task to end and its claim and spec to go")
        counted = collections.Counter(starts(client))
        assert counted == {"G:0": 1, "G:1": 1}, counted
        assert not client.keys("*:g:*")
        text = (tmp_path / "redis.log").read_text(errors="replace")
        assert f"removed the field G of {CLAIMS.groups_solo}: its claim names task" in text
        assert "waiting elsewhere" in text, text[-3000:]


@pytest.mark.parametrize("pool", POOLS)
def test_a_turn_claim_naming_a_running_task_of_its_group_never_runs_it_again(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, pool: str) -> None:
    """The same through a group's turn (a solo group's '/' claim, flow.lua's
    unsolo()): the claim is taken, but arm() looks for its token and pushes a new
    one, and the fetch never leases a leased task again (a guard: this passed
    before the fix too)."""
    log = tmp_path / "worker.log"
    with claims_run(logged_server, processes, request, log, fair_claims.job,
                    fair_claims.gated) as (app, client):
        serve_claims(logged_server, processes, log, pool)
        _next_beside_the_running(app, client, lambda task_id: client.hset(
            CLAIMS.fair_group("G", "turn"), mapping={"tok": f"7.7/5{task_id}", "band": "5"}))
        wait_until(lambda: claims_drained(client) and not client.keys("*:g:*"),
                   timeout=CLAIMS_DEADLINE, message="every task to end and its group to go")
        assert collections.Counter(starts(client)) == {"G:0": 1, "G:1": 1}
