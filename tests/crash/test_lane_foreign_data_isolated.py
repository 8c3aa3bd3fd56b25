"""A subscriber's lane whose keys hold another type (data minitask did not write) costs
that lane only: the worker still runs the tasks of its other queues, each once, and no
task is leased and left unrun; the lane's leases of another type are moved aside whole."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from minitask.broker.keys import lane, queue_keys
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_lane_of_another_type_leaves_the_default_queue_served(
        processes: Processes, start_redis: Any, pool: str, tmp_path: Path) -> None:
    server: RedisServer = start_redis()
    import tests.apps.lanes as lanes
    producer = Minitask("lanes", broker=server.client())
    double = producer.task(name="double")(lanes.double.func)
    client = server.client()
    leases = queue_keys("lanes", lane("cfg", "s1")).leases
    client.set(leases, b"not a sorted set")
    log = tmp_path / "worker.log"
    worker = processes.start("-m", "minitask", "worker", "-A", "tests.apps.lanes", "--pool",
                             pool, "-c", "2", "--name", "s1", log=log,
                             env={"MINITASK_BROKER_URL": server.url})
    handles = [double.delay(n) for n in range(5)]
    assert [h.get(timeout=DEADLINE) for h in handles] == [0, 2, 4, 6, 8]
    assert client.hvals(queue_keys("lanes", "default").deliveries) == []  # none handed twice
    assert producer.broker.queues.counts("default")["running"] == 0
    # the lane's fetch moves its leases aside whole (issue 29, M2: it used to refuse
    # the lane until someone fixed the key)
    wait_until(lambda: client.exists(leases + ":foreign"), timeout=DEADLINE,
               message="the lane's leases moved aside")
    assert client.get(leases + ":foreign") == b"not a sorted set"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    assert "Redis refused its lane" not in log.read_text()
    producer.close()
