"""Keys of another type planted where a worker's outcomes and fair groups write
(issue 29): a real worker process, ``-c 1`` on a thread pool, serving three queues,
on the suite's redis-server. Before, a dead-letter or retry Redis refused for the
queue's data was retried for ever, holding the only slot (H1: the canary's queue
stopped), and a ``flow_due`` of another type left a limited group's tasks queued
for ever (M1). Now the key is moved aside to ``<key>:foreign``, whole, the outcome
is recorded and the group goes on.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Dict, Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.outcome_aside import producer
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 30.0
BASE, FAIR = queue_keys("aside", "base"), queue_keys("aside", "fair2")
PLANTED = b"someone else's"


@pytest.fixture(params=["thread", "asyncio"])
def aside(redis_server: RedisServer, processes: Processes, tmp_path: Path,
          admin: "redis.Redis[bytes]", request: pytest.FixtureRequest) -> Iterator[Minitask]:
    env: Dict[str, str] = {"MINITASK_BROKER_URL": redis_server.url}
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.outcome_aside", "--pool", request.param, "-c", "1",
                              "-Q", "base,canary,fair2", env=env, log=log)
    app = producer(redis_server.client())
    try:
        # the worker serves: the canary answers
        assert app.tasks["aside.ping"].delay(0).get(timeout=DEADLINE) == 0
        yield app
        assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
        # and it stops within its grace: nothing holds its slot
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) is not None
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])


def test_a_dead_letter_whose_dead_key_holds_another_type_is_recorded(
        aside: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.set(BASE.dead, PLANTED)
    handle = aside.tasks["aside.doomed"].delay()
    assert aside.tasks["aside.ping"].delay(1).get(timeout=DEADLINE) == 1
    wait_until(lambda: handle.status() == "failed", timeout=DEADLINE,
               message="the task to be dead-lettered")
    assert admin.get(BASE.dead + ":foreign") == PLANTED
    assert admin.zscore(BASE.dead, handle.id) is not None


def test_a_retry_whose_delayed_key_holds_another_type_is_scheduled(
        aside: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.set(BASE.delayed, PLANTED)
    handle = aside.tasks["aside.flaky"].delay("flaky:count")
    assert aside.tasks["aside.ping"].delay(2).get(timeout=DEADLINE) == 2
    assert handle.get(timeout=DEADLINE) == "flaky:count"
    assert admin.get(BASE.delayed + ":foreign") == PLANTED


def test_a_limited_group_goes_on_when_flow_due_holds_another_type(
        aside: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.set(FAIR.flow_due, PLANTED)
    handles = [aside.tasks["aside.tenant_task"].delay("t1", n) for n in range(6)]
    assert [handle.get(timeout=DEADLINE) for handle in handles] == list(range(6))
    assert admin.get(FAIR.flow_due + ":foreign") == PLANTED
