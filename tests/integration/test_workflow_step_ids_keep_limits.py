"""A workflow step given an explicit task id keeps its task's limits (review of
fix29lows4): step_ids.lua reserves the id at ``delay()`` by writing the step's marker
(no state), and spawn_flow.lua wrote a step's flow spec only when no marker existed,
so such a step was sent without it and ran past ``max_running=1`` (four at once on a
worker of ``-c 4``). A real worker process on a test-owned redis-server."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from minitask import Minitask, chain
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

DEADLINE = 60.0
KEYS = queue_keys("reused", "default")


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.reused_ids as reused
    app = Minitask("reused", broker=server.client())
    for task in reused.app.tasks.values():
        app.task(name=task.name, max_running=task.options.limits.max_running or None)(task.func)
    yield app
    app.close()


def runs(path: Path) -> List[Tuple[float, float]]:
    """Each run's (start, end), in start order."""
    starts: Dict[str, float] = {}
    ends: Dict[str, float] = {}
    for line in path.read_text().splitlines():
        kind, n, at = line.split()
        (starts if kind == "start" else ends)[n] = float(at)
    return sorted((starts[n], ends[n]) for n in starts)


def test_explicit_step_ids_keep_the_steps_max_running(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    client = server.client()
    limited, add = producer.tasks["one_at_a_time"], producer.tasks["add"]
    record = tmp_path / "runs.txt"
    handles = [chain(limited.si(str(record), n).set(task_id=f"ex-{n}"), add.s(0)).delay()
               for n in range(4)]
    # each first step was sent with its spec, over its reservation
    assert sorted(client.hkeys(KEYS.flow)) == [f"ex-{n}".encode() for n in range(4)]
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.reused_ids", "--pool", "thread", "-c", "4",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    assert sorted(handle.get(timeout=DEADLINE) for handle in handles) == [0, 1, 2, 3]
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
    spans = runs(record)
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, f"two runs of a max_running=1 task overlapped: {spans}"
