"""The scale tests' kit: one broker URL, its worker processes and their markers.

Workers are real ``python -m minitask worker -A tests.apps.scale`` processes.
The test process enqueues through its own app of the same name (the tasks of
tests/apps/scale.py registered under the names the worker knows). Markers
live on the suite's plain redis-server, under keys that start with the
test's app name, so they survive whatever the test does to the broker.
"""
from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import redis

import tests.apps.scale as scale
from minitask import BrokerError, Minitask, Task
from tests.support.marks import Mark, parse_mark
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

APP_MODULE = "tests.apps.scale"
#: Lease length of workers under test: short, so that recovery is quick.
VISIBILITY = 2.0
DEADLINE = 60.0


def unique_app(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@dataclass
class ScaleKit:
    """One test's app on one broker, its worker processes and its markers."""

    broker: Union[str, "redis.Redis", "redis.RedisCluster"]
    worker_url: str
    marks_server: RedisServer
    processes: Processes
    logs: Path
    app_name: str
    marks: "redis.Redis" = field(init=False)
    app: Minitask = field(init=False)
    workers: List["subprocess.Popen[bytes]"] = field(default_factory=list)
    #: the app's durability, the producer's and the workers' (TEST_DURABILITY)
    durability: Optional[str] = None

    def __post_init__(self) -> None:
        self.marks = self.marks_server.client()
        self.app = Minitask(self.app_name, broker=self.broker,  # type: ignore[arg-type]
                            visibility_timeout=VISIBILITY, durability=self.durability)
        for task in (scale.record, scale.slow, scale.flaky, scale.doomed):
            found = task.options
            self.app.task(name=task.name, retries=found.retries,
                          retry_backoff=found.retry_backoff)(task.func)

    def task(self, short: str) -> "Task[Any, Any]":
        return self.app.tasks[f"{APP_MODULE}.{short}"]

    @property
    def client(self) -> Any:
        return self.app.broker.client

    def close(self) -> None:
        self.marks.close()
        self.app.close()

    # -- workers -------------------------------------------------------------

    def worker(self, *args: str, url: Optional[str] = None,
               visibility: float = VISIBILITY) -> "subprocess.Popen[bytes]":
        log = self.logs / f"worker-{len(self.workers)}.log"
        env = self.worker_env(url, visibility)
        process = self.processes.worker(APP_MODULE, *args, env=env, log=log)
        self.workers.append(process)
        return process

    def worker_env(self, url: Optional[str] = None,
                   visibility: float = VISIBILITY) -> Dict[str, str]:
        return {"MINITASK_BROKER_URL": url or self.worker_url, "TEST_APP": self.app_name,
                "TEST_MARKS_URL": self.marks_server.url, "TEST_VISIBILITY": str(visibility),
                "TEST_DURABILITY": self.durability or ""}

    def log_text(self) -> str:
        parts = []
        for index in range(len(self.workers)):
            path = self.logs / f"worker-{index}.log"
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def print_logs(self) -> None:
        for index in range(len(self.workers)):
            path = self.logs / f"worker-{index}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()
                print(f"----- {path} (last 80 of {len(lines)} lines)")
                print("\n".join(lines[-80:]))

    def wait_for_worker(self, count: int = 1, processed: int = 0) -> None:
        """Until ``count`` workers are listed, each reporting at least ``processed``
        tasks (a worker is listed as it starts; its heartbeats carry its counts)."""
        def listed() -> bool:
            live = self.app.broker.registry.live(self.app.clock.now_ms(), 60_000)
            return sum(int(w.get("processed") or 0) >= processed for w in live) >= count
        wait_until(listed, timeout=DEADLINE,
                   message=f"{count} live worker(s) with {processed}+ task(s) processed")

    # -- markers -------------------------------------------------------------

    def key(self, name: str) -> str:
        return f"{self.app_name}-{name}"

    def marks_of(self, kind: str, names: Sequence[str]) -> Dict[str, List[Mark]]:
        pipe = self.marks.pipeline(transaction=False)
        for name in names:
            pipe.lrange(f"marks:{kind}:{self.key(name)}", 0, -1)
        return {name: [parse_mark(raw) for raw in found]
                for name, found in zip(names, pipe.execute())}

    def done_count(self, names: Sequence[str]) -> int:
        return sum(1 for marks in self.marks_of("done", names).values() if marks)

    def wait_all_done(self, names: Sequence[str], timeout: float = DEADLINE) -> None:
        wait_until(lambda: self.done_count(names) == len(names), timeout=timeout,
                   interval=0.05, message=f"{len(names)} tasks to be done "
                   f"(done: {self.done_count(names)})")

    # -- producing -----------------------------------------------------------

    def enqueue(self, short: str, name: str, *args: Any, queue: str,
                deadline: float = DEADLINE, **options: Any) -> str:
        """Enqueue until Redis acknowledges it (through failovers); returns the id.

        Retries keep the task id, and enqueue ignores an id already pending,
        so a retry after a lost reply does not enqueue twice.
        """
        task_id = f"{self.key(name)}"
        task = self.task(short)
        wait_until(lambda: _tried(lambda: task.apply_async(
            (self.key(name), *args), queue=queue, task_id=task_id, **options)),
            timeout=deadline, interval=0.05, message=f"enqueue of {name} to succeed")
        return task_id

    # -- queue state ---------------------------------------------------------

    def left_in(self, queues: Sequence[str]) -> Dict[str, Dict[str, Any]]:
        broker = self.app.broker
        found = {}
        for queue in queues:
            counts = broker.queues.counts(queue)
            counts["messages"] = int(broker.client.hlen(broker.queues.keys(queue).messages))
            counts.pop("ready_by_priority")
            found[queue] = counts
        return found

    def wait_drained(self, queues: Sequence[str], timeout: float = DEADLINE) -> None:
        """Wait until nothing is left in the queues: no task, no stale entry or count.

        A look that cannot reach Redis (sentinels still agreeing on a new primary
        after a failover) counts as not drained yet; what is left is read again
        only for the message of a timeout.
        """
        def drained() -> bool:
            try:
                return not any(any(c.values()) for c in self.left_in(queues).values())
            except BrokerError:
                return False
        try:
            wait_until(drained, timeout=timeout, message=f"the queues {list(queues)} to drain")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; left: {self.left_in(queues)}") from None


def _tried(step: Any) -> bool:
    try:
        step()
    except BrokerError:
        return False
    return True
