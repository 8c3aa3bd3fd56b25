"""A process pool child that exits with code 0 between tasks while it holds prefetched
tasks: its supervisor gives back at once those it had not started (probe36 F2), and
says by one WARNING naming the child how many tasks it took with it all the same
(``leave``, its outcome not yet recorded: it runs again once its lease expires); the
worker goes on."""
from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

DEADLINE = 60.0
FOLLOWING = 5


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.leaving_child as leaving
    app = Minitask("leaving", broker=server.client(), visibility_timeout=2.0)
    for task in leaving.app.tasks.values():
        app.task(name=task.name)(task.func)
    yield app
    app.close()


def test_a_child_leaving_between_tasks_with_prefetched_ones_says_how_many_it_held(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    left = producer.tasks["leave"].delay()
    following = [producer.tasks["double"].delay(n) for n in range(FOLLOWING)]
    log = tmp_path / "worker.log"
    # enqueued first: the child's first fetch leases them all (prefetch 8)
    worker = processes.worker("tests.apps.leaving_child", "--pool", "process", "-c", "1",
                              "--prefetch", "8", "--max-tasks-per-child", "1000",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    assert [handle.get(timeout=DEADLINE) for handle in following] == \
        [2 * n for n in range(FOLLOWING)]
    assert left.get(timeout=DEADLINE) == "left"
    text = log.read_text(errors="replace")
    leaver = int(server.client().get("leaving:once") or 0)
    assert f"gave back {FOLLOWING} unfinished task(s) to queue 'default'" in text, text
    said = re.findall(r"child (\d+) exited with code 0 between tasks, holding (\d+) leased "
                      r"task\(s\)", text)
    # ``leave`` itself, its outcome not yet recorded (said), or recorded (nothing to say)
    assert len(said) <= 1, text
    for pid, held in said:
        assert int(pid) == leaver != worker.pid, text
        assert int(held) == 1, text
    assert worker.poll() is None, text
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
