"""The crash tests' kit: one test-owned Redis, its worker processes, their markers.

Workers are real ``python -m minitask worker -A tests.apps.basic`` processes; the
test process enqueues through its own client-side app of the same name, whose
tasks are registered under the names the worker knows. Everything is asserted on
Redis state and on the markers the tasks leave (``marks:<kind>:<key>``, entries
``id:attempt:pid``), never on logs; the logs are only printed when a test fails.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import redis

import tests.apps.basic as basic
from minitask import Minitask, Task
from minitask.broker.keys import AppKeys, QueueKeys
from tests.support.marks import Mark, parse_mark
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

#: Lease length of the workers under test: short, so that recovery is quick.
VISIBILITY = 2.0
APP_MODULE = "tests.apps.basic"
QUEUE = QueueKeys("basic", "default")
APP_KEYS = AppKeys("basic")
#: Generous deadlines for a slow shared machine; tests normally finish in seconds.
DEADLINE = 60.0


@dataclass
class ClientTasks:
    """The tasks of tests.apps.basic, registered on a client-side app for enqueueing."""

    app: Minitask
    record: "Task[Any, Any]"
    slow: "Task[Any, Any]"
    poison: "Task[Any, Any]"
    runaway: "Task[Any, Any]"
    runaway_retried: "Task[Any, Any]"
    interrupt: "Task[Any, Any]"


def client_tasks(broker: "Union[str, redis.Redis]", **options: Any) -> ClientTasks:
    """A producer: given a URL it connects the way a user's program does."""
    app = Minitask("basic", broker=broker, **options)

    def same(task: "Task[Any, Any]") -> "Task[Any, Any]":
        found = task.options
        return app.task(name=task.name, timeout=found.timeout, retries=found.retries,
                        retry_backoff=found.retry_backoff)(task.func)

    return ClientTasks(app, same(basic.record), same(basic.slow), same(basic.poison),
                       same(basic.runaway), same(basic.runaway_retried), same(basic.interrupt))


@dataclass
class Kit:
    """One test's Redis, its workers and its client side."""

    server: RedisServer
    processes: Processes
    logs: Path
    client: "redis.Redis" = field(init=False)
    tasks: ClientTasks = field(init=False)
    workers: List["subprocess.Popen[bytes]"] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = self.server.client()
        self.tasks = client_tasks(self.server.client())

    def close(self) -> None:
        self.client.close()
        self.tasks.app.close()

    # -- workers -------------------------------------------------------------

    def env(self, visibility: Optional[float] = VISIBILITY,
            max_deliveries: Optional[int] = None) -> Dict[str, str]:
        env = {"MINITASK_BROKER_URL": self.server.url}
        if visibility is not None:
            env["TEST_VISIBILITY"] = str(visibility)
        if max_deliveries is not None:
            env["TEST_MAX_DELIVERIES"] = str(max_deliveries)
        return env

    def worker(self, *args: str, visibility: Optional[float] = VISIBILITY,
               max_deliveries: Optional[int] = None, app: str = APP_MODULE,
               **more_env: str) -> "subprocess.Popen[bytes]":
        log = self.logs / f"worker-{len(self.workers)}.log"
        env = {**self.env(visibility, max_deliveries), **more_env}
        process = self.processes.worker(app, *args, env=env, log=log)
        self.workers.append(process)
        return process

    def print_logs(self) -> None:
        for index in range(len(self.workers)):
            path = self.logs / f"worker-{index}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()
                print(f"----- {path} (last 60 of {len(lines)} lines)")
                print("\n".join(lines[-60:]))

    # -- markers -------------------------------------------------------------

    def marks(self, kind: str, key: str) -> List[Mark]:
        return [parse_mark(raw) for raw in self.client.lrange(f"marks:{kind}:{key}", 0, -1)]

    def marks_of(self, kind: str, keys: Sequence[str]) -> Dict[str, List[Mark]]:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.lrange(f"marks:{kind}:{key}", 0, -1)
        return {key: [parse_mark(raw) for raw in found]
                for key, found in zip(keys, pipe.execute())}

    def mark_counts(self, kind: str, keys: Sequence[str]) -> Dict[str, int]:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.llen(f"marks:{kind}:{key}")
        return dict(zip(keys, (int(n) for n in pipe.execute())))

    def wait_for_marks(self, kind: str, key: str, count: int = 1,
                       timeout: float = DEADLINE) -> List[Mark]:
        found: List[Mark] = wait_until(
            lambda: (lambda m: m if len(m) >= count else None)(self.marks(kind, key)),
            timeout=timeout, message=f"{count} {kind} marker(s) of {key!r}")
        return found

    # -- queue state ---------------------------------------------------------

    def queue_state(self) -> Dict[str, int]:
        """How many entries each key of the default queue holds (ready: all its lists)."""
        q = QUEUE
        pipe = self.client.pipeline(transaction=False)
        for ready in q.ready:
            pipe.llen(ready)
        pipe.zcard(q.leases)
        pipe.zcard(q.delayed)
        pipe.zcard(q.dead)
        pipe.hlen(q.messages)
        pipe.hlen(q.deliveries)
        pipe.hlen(q.retrying)
        pipe.hlen(q.dead_info)
        counts = [int(n) for n in pipe.execute()]
        names = ("leases", "delayed", "dead", "messages", "deliveries", "retrying",
                 "dead_info")
        state = {"ready": sum(counts[:len(q.ready)])}
        state.update(zip(names, counts[len(q.ready):]))
        return state

    def is_ready(self, task_id: str) -> bool:
        """The id waits in one of the queue's ready lists."""
        return any(self.client.lpos(ready, task_id) is not None for ready in QUEUE.ready)

    def in_flight(self) -> int:
        """Tasks not yet finished: ready, leased or delayed."""
        state = self.queue_state()
        return state["ready"] + state["leases"] + state["delayed"]

    def wait_until_drained(self, timeout: float = DEADLINE) -> None:
        """Wait until every task left the queue (acked, or dead with its message kept)."""
        wait_until(lambda: self.in_flight() == 0 and
                   self.queue_state()["messages"] == self.queue_state()["dead"],
                   timeout=timeout, message=f"the queue to drain: {self.queue_state()}")

    def assert_nothing_left(self) -> None:
        state = self.queue_state()
        assert state == {name: 0 for name in state}, f"left in Redis: {state}"

    def blocked_clients(self) -> int:
        """Connections blocked in a BLPOP: one per idle worker process or thread waiting."""
        return int(self.client.info("clients")["blocked_clients"])

    def blocked_in(self, command: str) -> int:
        """Connections blocked in ``command`` (blpop: the wait for tasks and the orders
        listener; xread: the cancel watch, which blocks too)."""
        return sum(1 for client in self.client.client_list()
                   if "b" in client.get("flags", "") and client.get("cmd") == command)

    def live_workers(self) -> int:
        return int(self.client.zcard(APP_KEYS.workers))
