"""A plain solo group's claim in ``flow:groups_solo`` changed or planted (data minitask
did not write; probe 29): a claim naming a task that does not exist, garbage, a 20 MB
value, a claim whose generation differs from its token's. Real worker processes on a
real redis-server: every task, the group's later ones included, runs exactly once,
and the group goes on (before, the ghost claim stranded the group for good, and a
garbled claim its task, with nothing said).
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable, Dict

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps import fair
from tests.support.fair import starts
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

FAIR = QueueKeys("fair", "default")
DEADLINE = 90.0
GROUPS = "ABCDE"

#: each plant, from the claim minitask wrote (a generation, ':', a digit and the id)
PLANTS: Dict[str, Callable[[bytes], bytes]] = {
    "ghost id": lambda claim: claim[:-5] + b"ZZZZZ",
    "garbage": lambda claim: b"not-a-claim",
    "20 MB": lambda claim: b"9" * (20 << 20),
    "other generation": lambda claim: claim.replace(b".1:", b".7:", 1),
}


@pytest.mark.parametrize("joined", [True, False], ids=["joined", "alone"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_solo_claim_strands_neither_its_group_nor_its_task(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, plant: str, joined: bool) -> None:
    client = logged_server.client()
    app = Minitask("fair", broker=logged_server.client())
    app.task(name="tests.apps.fair.tenant_job", group_by="tenant")(fair.tenant_job.func)
    job = app.tasks["tests.apps.fair.tenant_job"]
    job.delay_many([(group, 0) for group in GROUPS])  # solo groups: a claim each
    claim = client.hget(FAIR.groups_solo, "A")
    assert claim is not None and b":" in claim
    client.hset(FAIR.groups_solo, "A", PLANTS[plant](claim))
    expected = [f"{group}:0" for group in GROUPS]
    if joined:  # a second task joins each group: the claim is lifted to the set form
        job.delay_many([(group, 1) for group in GROUPS])
        expected += [f"{group}:1" for group in GROUPS]
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.fair", "--pool", "thread", "-c", "2", "--loglevel",
                     "WARNING", env={"MINITASK_BROKER_URL": logged_server.url}, log=log)
    try:
        wait_until(lambda: len(starts(client, "fair")) >= len(expected), timeout=DEADLINE,
                   message=f"the {len(expected)} tasks to start")
        # the group goes on: a task sent to it afterwards runs too
        job.delay("A", 9)
        expected.append("A:9")
        wait_until(lambda: "A:9" in starts(client, "fair"), timeout=DEADLINE,
                   message="a later task of group A to start")
        wait_until(lambda: not client.exists(FAIR.groups_solo, FAIR.flow),
                   timeout=DEADLINE, message="the groups' claims and specs to go")
        counted = collections.Counter(starts(client, "fair"))
        assert sorted(counted) == sorted(expected)
        assert set(counted.values()) == {1}, counted  # none ran twice
        assert not client.keys("*:g:*")
        if plant in ("garbage", "20 MB"):  # said once, by its length
            text = (tmp_path / "redis.log").read_text(errors="replace")
            said = f"minitask: removed the field A of {FAIR.groups_solo}: "
            assert text.count(said) == 1, text[-3000:]
            assert f"{said}{len(PLANTS[plant](claim))} bytes" in text
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
