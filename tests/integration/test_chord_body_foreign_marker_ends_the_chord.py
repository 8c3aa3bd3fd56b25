"""A chord whose body's step marker (``once:<id>``) holds data minitask did not write
(a string) ended nowhere: the member that filled the group was refused sending the
body, dead-lettered, and the body stayed pending for ever (``get()`` timed out).
The chord's result now ends in a failure naming the key and what it holds; the key
is left as it is. A real worker process on a test-owned redis-server."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask, TaskFailed, chord
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
        app.task(name=task.name)(task.func)
    yield app
    app.close()


def test_a_chord_body_whose_marker_is_foreign_ends_failed_naming_it(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    client = server.client()
    add, total = producer.tasks["add"], producer.tasks["total"]
    handle = chord([add.si(1, 1), add.si(2, 2)], total.s()).delay()
    marker = KEYS.once(handle.id)
    assert client.exists(marker) == 0  # the body is not sent yet
    client.set(marker, "planted")
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.reused_ids", "--pool", "thread", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=DEADLINE)
    said = str(ended.value)
    assert marker in said and "string" in said, said
    assert client.get(marker) == b"planted"  # left as it is
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
