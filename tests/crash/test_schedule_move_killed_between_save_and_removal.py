"""A producer SIGKILLed while ``add_schedule`` moves a schedule to another queue, after
its save in the new queue and before its removal from the old one (saved first, so that
no failure loses it): the schedule is in both queues, and, as docs/guide/periodic.rst
says, it runs once in each at every tick (two runs of one tick, the same id in each
queue), ``app.schedules()`` lists both, and a worker serving both queues says so once,
naming them. A later ``add_schedule`` of the name repairs it (each tick then runs once,
in the queue meant), and so does ``remove_schedule`` (in none). Real producer and worker
processes on a test-owned redis-server."""
from __future__ import annotations

import re
import signal
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest
import redis

from minitask import Minitask
from tests.support.processes import Processes, kill_group
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
APP = "tests.apps.moving_schedule"


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.moving_schedule as moving
    app = Minitask("moving", broker=server.client())
    app.task(name="tick", queue="old")(moving.tick.func)
    yield app
    app.close()


def _runs(client: "redis.Redis[bytes]") -> Dict[str, Set[str]]:
    """The queues each run id ran in."""
    found: Dict[str, Set[str]] = defaultdict(set)
    for entry in client.lrange("runs", 0, -1):
        queue, task_id = entry.decode().split(" ")
        found[task_id].add(queue)
    return found


def _stamp(client: "redis.Redis[bytes]") -> str:
    """Redis's time now, written as a tick's id writes it (sorts as the ids do)."""
    import datetime
    seconds, micros = client.time()
    at = datetime.datetime.fromtimestamp(seconds + micros / 1e6, datetime.timezone.utc)
    return "moving@" + at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _killed_mid_move(processes: Processes, server: RedisServer, producer: Minitask,
                     said: Path) -> None:
    """Run a producer moving the schedule from "old" to "new" until it has saved it in
    "new", SIGKILL it there, and check that both queues hold it."""
    mover = processes.start("-m", APP, log=said, env={"MINITASK_BROKER_URL": server.url})
    wait_until(lambda: re.search(r"^saved$", said.read_text(), re.M), timeout=DEADLINE,
               message="the save in the new queue")
    kill_group(mover)
    assert mover.returncode == -signal.SIGKILL
    store = producer.broker.schedules
    assert store.one("old", "moving") is not None and store.one("new", "moving") is not None
    assert sorted(s.queue for s in producer.schedules()) == ["new", "old"]


def test_a_move_killed_between_save_and_removal_runs_in_both_until_repaired(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    client = server.client()
    store = producer.broker.schedules
    producer.add_schedule("moving", "tick", every=1.0)  # in queue "old"
    _killed_mid_move(processes, server, producer, tmp_path / "producer.log")

    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", "thread", "-Q", "old,new",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    try:
        # one tick runs twice: once from each queue, under the same id
        wait_until(lambda: any(len(queues) == 2 for queues in _runs(client).values()),
                   timeout=DEADLINE, message="a tick run in both queues")
        warned = "several queues runs once in each at every tick"
        wait_until(lambda: warned in log.read_text() and "'moving' in queues 'new', 'old'; "
                   in log.read_text(),
                   timeout=DEADLINE, message="the worker's warning")

        producer.add_schedule("moving", "tick", every=1.0, queue="new")  # the repair
        assert store.one("old", "moving") is None
        assert [s.queue for s in producer.schedules()] == ["new"]
        repaired = _stamp(client)  # ticks after this one fire from "new" alone
        wait_until(lambda: len([i for i in _runs(client) if i > repaired]) >= 3,
                   timeout=DEADLINE, message="three ticks after the repair")
        after = {i: queues for i, queues in _runs(client).items() if i > repaired}
        assert all(queues == {"new"} for queues in after.values()), after

        producer.add_schedule("moving", "tick", every=1.0, queue="old")
        _killed_mid_move(processes, server, producer, tmp_path / "again.log")  # both again
        assert producer.remove_schedule("moving")  # the other repair: in none
        assert store.one("old", "moving") is None and store.one("new", "moving") is None
        assert producer.schedules() == []
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
