"""A fair-queue group key planted with another type after a send (issue 29, issue
35): real worker processes on a real redis-server. A grouped task waiting delayed,
and a workflow step joining its group as the step before ends, still run: the
planted key is moved aside to ``<key>:foreign``, whole, and the group goes on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import redis

from minitask import Minitask, chain
from minitask.broker.keys import queue_keys
from tests.apps.fair_steps import producer
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
KEYS = queue_keys("fairsteps", "default")


@pytest.fixture
def steps(redis_server: RedisServer, processes: Processes, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[Minitask]:
    env: Dict[str, str] = {"MINITASK_BROKER_URL": redis_server.url, "TEST_VISIBILITY": "5"}
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.fair_steps", "--pool", "thread", "-c", "2",
                              env=env, log=log)
    app = producer(redis_server.client())
    try:
        yield app
        assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])


def _log(client: "redis.Redis[bytes]", group: str) -> List[str]:
    return [raw.decode() for raw in client.lrange(f"steps:log:{group}", 0, -1)]


@pytest.mark.parametrize("part", ["ready", "turn"])
def test_grouped_tasks_joining_a_group_whose_key_was_planted_run_on_a_worker(
        steps: Minitask, admin: "redis.Redis[bytes]", part: str) -> None:
    serial, tenant_of = steps.tasks["steps.serial"], steps.tasks["steps.tenant_of"]
    # a delayed grouped task, its group's key planted while it waits
    delayed = serial.apply_async(("d", 0, "D"), delay=1.5)
    admin.set(KEYS.fair_group("d", part), "someone else's")
    # a workflow whose second step joins group w as the first ends (spawn_flow.lua)
    admin.set(KEYS.fair_group("w", part), "someone else's too")
    flow = chain(tenant_of.si("w"), serial.s(0, "W")).delay()
    assert delayed.get(timeout=DEADLINE) == "d"
    assert flow.get(timeout=DEADLINE) == "w"
    assert _log(admin, "d") == ["start:D:0", "end:D:0"]
    assert _log(admin, "w") == ["start:W:0", "end:W:0"]
    assert admin.get(KEYS.fair_group("d", part) + ":foreign") == b"someone else's"
    assert admin.get(KEYS.fair_group("w", part) + ":foreign") == b"someone else's too"
    # and the groups leave nothing of minitask's behind
    wait_until(lambda: not [key for key in admin.keys("minitask:{fairsteps:default}:flow:*")
                            if not key.endswith(b":foreign")],
               timeout=DEADLINE, message="the groups' keys and the steps' specs to go")
