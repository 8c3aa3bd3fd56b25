"""Fair queues in workflows (guide/fair-queues, "Workflows"): the suite's real
redis-server, real worker processes. Steps of chains, members of a chord sent by
the worker when the step before them ended, and a chord's body go into their
groups: with ``group_max_running=1`` the steps of one group never overlap, whichever
workflow they belong to, while other groups run beside them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask, chain, chord
from minitask.stores.scripts import source
from tests.apps.fair_steps import producer
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 120.0
APP = "tests.apps.fair_steps"


@pytest.fixture
def steps(redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
          tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Minitask]:
    """Two worker processes of four threads each: without groups, steps of two
    workflows would run at once."""
    env: Dict[str, str] = {"MINITASK_BROKER_URL": redis_server.url, "TEST_VISIBILITY": "5"}
    logs = [tmp_path / f"worker-{i}.log" for i in range(2)]
    for log in logs:
        processes.worker(APP, "--pool", "thread", "-c", "4", env=env, log=log)
    app = producer(redis_server.client())
    try:
        yield app
    finally:
        app.close()
        if did_fail(request):
            for log in logs:
                print(log.read_text(errors="replace")[-6000:])


def _log(client: "redis.Redis[bytes]", group: str) -> List[str]:
    return [raw.decode() for raw in client.lrange(f"steps:log:{group}", 0, -1)]


def _one_at_a_time(records: List[str]) -> List[str]:
    """Starts and ends alternate, each end the start's (no two steps of the group ran
    at once); returns the steps, in the order they ran."""
    ran = []
    for index in range(0, len(records), 2):
        start, end = records[index:index + 2]
        assert start.startswith("start:") and end == "end:" + start[len("start:"):], records
        ran.append(start[len("start:"):])
    return ran


def test_chain_steps_run_in_their_groups_one_at_a_time(
        steps: Minitask, admin: "redis.Redis[bytes]") -> None:
    serial, tenant_of = steps.tasks["steps.serial"], steps.tasks["steps.tenant_of"]
    handles = [
        chain(serial.si("g", n, "A") for n in range(5)).delay(),
        chain(serial.si("g", n, "B") for n in range(5)).delay(),
        # an ungrouped first step whose result is the group of the steps after it
        chain(tenant_of.si("g"), serial.s(0, "C"), serial.s(1, "C")).delay(),
        chain(serial.si("h", n, "D") for n in range(5)).delay(),
    ]
    for handle in handles:
        assert handle.get(timeout=DEADLINE) in ("g", "h")
    ran = _one_at_a_time(_log(admin, "g"))
    assert sorted(ran) == sorted([f"{tag}:{n}" for tag in "AB" for n in range(5)]
                                 + ["C:0", "C:1"])
    for tag in "ABC":  # each chain's steps in order
        mine = [step for step in ran if step.startswith(tag)]
        assert mine == sorted(mine), ran
    assert _one_at_a_time(_log(admin, "h")) == [f"D:{n}" for n in range(5)]
    # nothing of the groups is left once every step ended
    wait_until(lambda: not admin.keys("minitask:{fairsteps:default}:flow:*"),
               timeout=DEADLINE, message="the groups' keys and the steps' specs to go")


def test_chord_members_sent_by_a_worker_and_its_body_run_in_their_group(
        steps: Minitask, admin: "redis.Redis[bytes]") -> None:
    serial, collect = steps.tasks["steps.serial"], steps.tasks["steps.collect"]
    header = [serial.si("g", n, "M") for n in range(6)]
    handle = chain(serial.si("h", 0, "pre"),
                   chord(header, collect.s("body").set(group="g"))).delay()
    # and, beside it, a chain in the same group: its steps wait their turns too
    beside = chain(serial.si("g", n, "X") for n in range(3)).delay()
    assert handle.get(timeout=DEADLINE) == 6
    assert beside.get(timeout=DEADLINE) == "g"
    ran = _one_at_a_time(_log(admin, "g"))
    assert sorted(ran) == sorted([f"M:{n}" for n in range(6)] + ["body:0"]
                                 + [f"X:{n}" for n in range(3)])
    assert ran.index("body:0") > max(ran.index(f"M:{n}") for n in range(6))
    wait_until(lambda: not admin.keys("minitask:{fairsteps:default}:flow:*"),
               timeout=DEADLINE, message="the groups' keys and the steps' specs to go")


def test_a_tasks_max_running_and_its_groups_limits_hold_together_on_workers(
        steps: Minitask, admin: "redis.Redis[bytes]") -> None:
    capped = steps.tasks["steps.capped"]
    groups = [f"g{i}" for i in range(6)]
    for n in range(8):
        handles = capped.delay_many([(group, n) for group in groups])
    handles[-1].get(timeout=DEADLINE)
    wait_until(lambda: len(_log(admin, "capped")) == 2 * 6 * 8, timeout=DEADLINE,
               message="every task to end")
    running: Dict[str, int] = {}
    most = 0
    for record in _log(admin, "capped"):
        kind, group, n = record.split(":")
        if kind == "start":
            assert group not in running, record  # one at a time per group
            running[group] = int(n)
            most = max(most, len(running))
        else:
            assert running.pop(group) == int(n), record
    assert most <= 2  # the task's max_running, across both workers' eight threads
    for group in groups:  # each group in order
        starts = [r for r in _log(admin, "capped") if r.startswith(f"start:{group}:")]
        assert starts == [f"start:{group}:{n}" for n in range(8)]
    wait_until(lambda: not [key for key in admin.keys("minitask:{fairsteps:default}:flow*")
                            if not key.endswith(b":starts")],
               timeout=DEADLINE, message="the groups' and the limiter's keys to go")


def _script_runs(client: "redis.Redis[bytes]", shas: Dict[str, str]) -> Dict[str, int]:
    """How many times each script ran, counted by its sha in the server's slow log
    (every command is logged: the server is started with a threshold of 0 us)."""
    runs = dict.fromkeys(shas, 0)
    by_sha = {sha.encode(): name for name, sha in shas.items()}
    for entry in client.slowlog_get(100_000):
        words = bytes(entry["command"]).split(b" ", 2)
        if words[0].upper() == b"EVALSHA" and len(words) > 1 and words[1] in by_sha:
            runs[by_sha[words[1]]] += 1
    return runs


def test_ungrouped_steps_are_sent_by_spawn_lua_and_grouped_ones_by_spawn_flow_lua(
        start_redis: Callable[..., RedisServer], processes: Processes,
        tmp_path: Path) -> None:
    """In an app with fair tasks, a step with neither limits nor a group is sent by
    spawn.lua, as in any app: spawn_flow.lua (which adds a step's spec and joins its
    group) only for a step that has one, whether the producer or a worker sends it."""
    server = start_redis("--slowlog-log-slower-than", "0", "--slowlog-max-len", "100000")
    client = server.client()
    # loaded first, so that no call is answered NOSCRIPT (logged too) and sent again
    shas = {name: client.script_load(source(name)) for name in ("spawn", "spawn_flow")}
    processes.worker(APP, "--pool", "thread", "-c", "2",
                     env={"MINITASK_BROKER_URL": server.url}, log=tmp_path / "worker.log")
    app = producer(server.client())
    try:
        tenant_of, serial = app.tasks["steps.tenant_of"], app.tasks["steps.serial"]
        # three ungrouped steps: the producer sends the first, the worker the others
        handle = chain(tenant_of.si("g"), tenant_of.si("h"), tenant_of.si("i")).delay()
        assert handle.get(timeout=DEADLINE) == "i"
        assert _script_runs(client, shas) == {"spawn": 3, "spawn_flow": 0}
        # the count tells them apart: a grouped step the worker sends
        handle = chain(tenant_of.si("g"), serial.si("g", 0, "S")).delay()
        assert handle.get(timeout=DEADLINE) == "g"
        assert _script_runs(client, shas) == {"spawn": 4, "spawn_flow": 1}
    finally:
        app.close()
        client.close()
