"""A real worker of tests.apps.planted_schedules (queues "other" and "timed") on a
test's own redis-server, for the tests that plant schedule data minitask did not
write: how long a task of "other" waits, and what Redis sends while it is watched."""
from __future__ import annotations

import subprocess
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

DEADLINE = 60.0


@dataclass
class PlantedWorker:
    client: "redis.Redis[bytes]"
    worker: "subprocess.Popen[bytes]"
    log: Path
    mark: Any

    def ran_within(self, token: str, seconds: float) -> float:
        """How long a task of queue "other" took to run (inf: not within ``seconds``)."""
        sent = time.monotonic()
        self.mark.delay(token)
        while time.monotonic() - sent < seconds:
            if token.encode() in self.client.lrange("marks:other", 0, -1):
                return time.monotonic() - sent
            time.sleep(0.01)
        return float("inf")

    def watch(self, seconds: float, each_within: float) -> Tuple[int, List[float]]:
        """Tasks of "other" sent one after another for ``seconds``: the bytes Redis
        sent meanwhile, and each task's wait."""
        self.client.config_resetstat()
        before = int(self.client.info("stats")["total_net_output_bytes"])
        waits: List[float] = []
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            waits.append(self.ran_within(uuid.uuid4().hex, each_within))
            time.sleep(0.2)
        return int(self.client.info("stats")["total_net_output_bytes"]) - before, waits

    def runs_after(self, runs_before: int, more: int = 5) -> List[bytes]:
        """The run ids of the worker's own schedule, once ``more`` ran past
        ``runs_before``."""
        wait_until(lambda: self.client.llen("marks:timed") >= runs_before + more,
                   timeout=DEADLINE, message="the schedule's runs to go on")
        return list(self.client.lrange("marks:timed", 0, -1))


@contextmanager
def planted_worker(server: RedisServer, processes: Processes, tmp_path: Path,
                   request: pytest.FixtureRequest) -> Iterator[PlantedWorker]:
    """The worker started, its schedule run once and a task of "other" run; its log
    printed if the test failed, everything closed after."""
    client = server.client()
    app = Minitask("planted", broker=server.client())
    app.task(queue="other", name="mark")(lambda token: None)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.planted_schedules", "--pool", "thread", "-c", "2",
                              "-Q", "other,timed", env={"MINITASK_BROKER_URL": server.url},
                              log=log)
    served = PlantedWorker(client, worker, log, app.tasks["mark"])
    try:
        wait_until(lambda: client.llen("marks:timed") >= 1, timeout=DEADLINE,
                   message="the schedule's first run")
        assert served.ran_within("first", DEADLINE) < DEADLINE
        yield served
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
