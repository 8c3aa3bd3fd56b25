"""max_running across worker processes killed with SIGKILL.

Four real workers run ``tests.apps.flow.held`` (``max_running=2``); workers that
hold one are killed mid-task and replaced. From the start and end timestamps the
tasks record, never more than two run at once; every task finishes; once the
dead workers' leases expire no slot stays taken.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Set, Tuple

import pytest

from minitask import Minitask
from minitask.broker.keys import AppKeys, QueueKeys
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 120.0
VISIBILITY = 2.0
QUEUE = QueueKeys("flow", "default")
LIMITER = "21:tests.apps.flow.held"


class Crowd:
    """Worker processes of the flow app on a test-owned server, and what they record."""

    def __init__(self, server: RedisServer, processes: Processes, logs: Path) -> None:
        self.server = server
        self.processes = processes
        self.logs = logs
        self.client = server.client()
        self.app = Minitask("flow", broker=server.client())
        self.held = self.app.task(name="tests.apps.flow.held", max_running=2)(
            lambda n, seconds: n)
        self.workers: List["subprocess.Popen[bytes]"] = []

    def start_worker(self) -> None:
        env = {"MINITASK_BROKER_URL": self.server.url, "TEST_VISIBILITY": str(VISIBILITY)}
        log = self.logs / f"worker-{len(self.workers)}.log"
        self.workers.append(self.processes.worker("tests.apps.flow", "--pool", "thread",
                                                  "-c", "2", env=env, log=log))

    def records(self, kind: str) -> List[Tuple[float, str, int]]:
        found = []
        for raw in self.client.lrange(f"flow:held:{kind}", 0, -1):
            at, task_id, pid = raw.decode().split(":")
            found.append((float(at), task_id, int(pid)))
        return found

    def running_now(self) -> Dict[str, Tuple[float, int]]:
        """Attempts started and not ended: task id -> (start, pid)."""
        ended = {(task_id, pid) for _, task_id, pid in self.records("end")}
        return {task_id: (at, pid) for at, task_id, pid in self.records("start")
                if (task_id, pid) not in ended}

    def print_logs(self) -> None:
        for index in range(len(self.workers)):
            path = self.logs / f"worker-{index}.log"
            print(f"----- {path}\n{path.read_text(errors='replace')[-4000:]}")


@pytest.fixture
def crowd(start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[Crowd]:
    setup = Crowd(start_redis(), processes, tmp_path)
    try:
        yield setup
    finally:
        if did_fail(request):
            setup.print_logs()
        setup.app.close()
        setup.client.close()


def most_at_once(intervals: List[Tuple[float, float]]) -> int:
    """The most intervals that overlap at any instant (an end before a start at a tie)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_max_running_holds_through_sigkills_and_leaks_no_slot(crowd: Crowd) -> None:
    for _ in range(4):
        crowd.start_worker()
    wait_until(lambda: crowd.client.zcard(AppKeys("flow").workers) >= 4, timeout=DEADLINE,
               message="4 workers to start")
    handles = crowd.held.delay_many([(n, 0.4) for n in range(16)])
    killed_at: Dict[Tuple[str, int], float] = {}
    killed_pids: Set[int] = set()
    for _ in range(2):
        # kill a worker while it runs one: its slot stays taken until its lease expires
        victim = wait_until(
            lambda: next(((task_id, pid) for task_id, (_, pid) in crowd.running_now().items()
                          if pid not in killed_pids), None),
            timeout=DEADLINE, message="a worker running a held task")
        os.killpg(victim[1], signal.SIGKILL)
        killed_at[victim] = time.time()
        killed_pids.add(victim[1])
        crowd.start_worker()
    for handle in handles:
        handle.get(timeout=DEADLINE)
    starts = crowd.records("start")
    ends = {(task_id, pid): at for at, task_id, pid in crowd.records("end")}
    intervals = []
    for at, task_id, pid in starts:
        end = ends.get((task_id, pid), killed_at.get((task_id, pid)))
        assert end is not None, f"attempt of {task_id} in {pid} neither ended nor was killed"
        intervals.append((at, end))
    assert most_at_once(intervals) <= 2
    assert len(starts) >= 16 + len(killed_at)  # the killed attempts ran again
    # every slot was given back: by the outcomes, and by the dead workers' expired leases
    state = crowd.app.broker.flow.limiter_state("default", LIMITER)
    assert state["running"] == [] and state["parked"] == 0
    assert crowd.client.hlen(QUEUE.flow) == 0
    assert crowd.client.zcard(QUEUE.leases) == 0
