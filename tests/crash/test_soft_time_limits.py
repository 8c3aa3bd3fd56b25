"""Soft time limits in real worker processes, on every pool, against a real redis-server.

On each pool and for plain and ``async def`` tasks alike: a task that catches
SoftTimeLimitExceeded cleans up (writes a marker, awaiting if async) and returns;
one that goes on regardless fails at its hard limit; one that lets it escape fails
that attempt and is retried; and the tasks after them run untouched (no timer left
armed, no stray exception).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import tests.apps.soft as soft
from minitask import Minitask, Task, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

#: Generous: a loaded 2-core machine; every wait below is bounded by it.
DEADLINE = 60.0
#: Each task runs at most a few seconds; the worker starts within the deadline.
RUN = pytest.mark.timeout(300)


class Soft:
    """The test's side: a producer for tests.apps.soft and the markers its tasks leave."""

    def __init__(self, server: RedisServer) -> None:
        self.client = server.client()
        self.app = Minitask("soft", broker=server.client())
        self.tasks: Dict[str, "Task[Any, Any]"] = {}
        for name in ("cleans_up", "ignores", "uncaught", "escapes", "quick", "nap", "acleans_up",
                     "aignores", "anap"):
            task = getattr(soft, name)
            self.tasks[name] = self.app.task(name=task.name)(task.func)

    def run(self, name: str, *args: Any) -> Any:
        return self.tasks[name].delay(*args).get(timeout=DEADLINE)

    def failure(self, name: str, *args: Any) -> TaskFailed:
        with pytest.raises(TaskFailed) as failed:
            self.run(name, *args)
        return failed.value

    def marks(self, kind: str, key: str) -> List[str]:
        return [raw.decode() for raw in self.client.lrange(f"marks:{kind}:{key}", 0, -1)]

    def attempts(self, kind: str, key: str) -> List[int]:
        return [int(mark.split(":")[1]) for mark in self.marks(kind, key)]


@pytest.fixture
def worker_on(start_redis: Callable[..., RedisServer], processes: Processes,
              tmp_path: Path) -> Iterator[Callable[[str], Soft]]:
    opened: List[Soft] = []

    def start(pool: str) -> Soft:
        server = start_redis()
        processes.worker("tests.apps.soft", "--pool", pool, "-c", "1",
                         env={"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": "5"},
                         log=tmp_path / f"worker-{pool}.log")
        side = Soft(server)
        opened.append(side)
        return side

    try:
        yield start
    finally:
        for side in opened:
            side.app.close()
            side.client.close()
        for log in sorted(tmp_path.glob("worker-*.log")):
            print(f"----- {log}\n" + "\n".join(log.read_text(errors="replace")
                                               .splitlines()[-40:]))


@RUN
@pytest.mark.parametrize("pool", ["process", "thread", "asyncio"])
def test_a_plain_task_gets_its_soft_limit_cleans_up_and_the_next_runs_normally(
        worker_on: Callable[[str], Soft], pool: str) -> None:
    side = worker_on(pool)
    # the process pool's signal interrupts one long time.sleep; a thread's
    # asynchronous exception comes between short sleeps
    step = soft.LONG if pool == "process" else 0.02

    assert side.run("cleans_up", "c1", step) == "cleaned"
    assert len(side.marks("cleaned", "c1")) == 1

    assert side.run("quick", "q1") == "q1"
    # runs past the time quick's soft limit would have rung, had it been left armed
    assert side.run("nap", "n1", 1.0) == "n1 timer=0", "no interval timer left running"

    failed = side.failure("ignores", "i1", step, 5.0)
    assert failed.exc_type == "TimeLimitExceeded", failed
    assert len(side.marks("soft", "i1")) == 1, "it saw its soft limit once"
    # the process pool kills it at its timeout; a thread cannot be stopped, its
    # limit is checked when it returns
    assert len(side.marks("done", "i1")) == (0 if pool == "process" else 1)

    assert side.run("uncaught", "u1", step) == "attempt 2"
    assert side.attempts("started", "u1") == [1, 2], "the escaped soft limit was a failure"
    failed = side.failure("escapes", "e1", step)
    assert failed.exc_type == "SoftTimeLimitExceeded", failed
    assert "soft timeout of 0.5 s" in failed.message and "escapes" in failed.message

    assert side.run("nap", "n2", 1.0) == "n2 timer=0"


@RUN
@pytest.mark.parametrize("pool", ["asyncio", "process", "thread"])
def test_a_coroutine_gets_its_soft_limit_at_its_await_and_the_hard_limit_after(
        worker_on: Callable[[str], Soft], pool: str) -> None:
    side = worker_on(pool)

    assert side.run("acleans_up", "c1") == "cleaned"
    assert len(side.marks("cleaned", "c1")) == 1, "the clean-up awaited and wrote its marker"

    assert side.run("anap", "n1", 1.0) == "n1"

    failed = side.failure("aignores", "i1")
    assert failed.exc_type == "TimeLimitExceeded", failed
    assert len(side.marks("soft", "i1")) == 1
    assert side.marks("done", "i1") == [], "cancelled at its hard limit"

    assert side.run("anap", "n2", 1.0) == "n2"
