"""A workflow step given an explicit task id keeps its task's limits (review of
fix29lows4): step_ids.lua reserves the id at ``delay()`` by writing the step's marker
(no state), and spawn_flow.lua wrote a step's flow spec only when no marker existed,
so such a step was sent without it and ran past ``max_running=1`` (four at once on a
worker of ``-c 4``). A real worker process on a test-owned redis-server."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from minitask import Minitask, chain
from tests.support.processes import Processes
from tests.support.reused_ids import (  # noqa: F401
    DEADLINE, KEYS, producer, reused_worker, server, stop_worker)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def runs(path: Path) -> List[Tuple[float, float]]:
    """Each run's (start, end), in start order."""
    starts: Dict[str, float] = {}
    ends: Dict[str, float] = {}
    for line in path.read_text().splitlines():
        kind, n, at = line.split()
        (starts if kind == "start" else ends)[n] = float(at)
    return sorted((starts[n], ends[n]) for n in starts)


def test_explicit_step_ids_keep_the_steps_max_running(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    limited, add = producer.tasks["one_at_a_time"], producer.tasks["add"]
    record = tmp_path / "runs.txt"
    handles = [chain(limited.si(str(record), n).set(task_id=f"ex-{n}"), add.s(0)).delay()
               for n in range(4)]
    # each first step was sent with its spec, over its reservation
    assert sorted(client.hkeys(KEYS.flow)) == [f"ex-{n}".encode() for n in range(4)]
    log = tmp_path / "worker.log"
    worker = reused_worker(processes, server, log, "-c", "4")
    assert sorted(handle.get(timeout=DEADLINE) for handle in handles) == [0, 1, 2, 3]
    stop_worker(worker, log)
    spans = runs(record)
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, f"two runs of a max_running=1 task overlapped: {spans}"
