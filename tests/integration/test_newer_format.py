"""A rolling deploy's promise: a real worker that meets a message of a newer format
than it knows dead-letters it, saying it was written by a newer minitask, and goes on
with the rest; nothing crashes, nothing is dropped (thread and process pools, a real
redis-server)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import msgpack
import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

EXIT_TIMEOUT = 90


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with redis_server.client() as client:
        client.flushall()  # our own server: every test starts empty
    yield redis_server.url


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_message_of_a_newer_envelope_is_dead_lettered_as_written_by_a_newer_minitask(
        pool: str, url: str, redis_server: RedisServer, processes: Processes,
        tmp_path: Path) -> None:
    app = Minitask("basic", broker=url)

    @app.task(name="tests.apps.basic.add")
    def add(x: int, y: int) -> int:
        raise AssertionError("runs in the worker only")

    before = add.delay(1, 2)
    future = add.delay(3, 4)
    after = add.delay(5, 6)
    messages = queue_keys("basic", "default").messages
    with redis_server.client() as client:
        fields = msgpack.unpackb(client.hget(messages, future.id), raw=False)
        fields["v"] += 1  # what a producer of the next format would write in its place
        fields["a field of the future"] = {"x": 1}
        client.hset(messages, future.id, msgpack.packb(fields, use_bin_type=True))

    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.basic", "--pool", pool, "-c", "1", "--burst",
                              env={"MINITASK_BROKER_URL": url}, log=log)
    assert worker.wait(timeout=EXIT_TIMEOUT) == 0, log.read_text(errors="replace")

    assert before.get(timeout=5) == 3
    assert after.get(timeout=5) == 11
    [dead] = app.dead_letters("default")
    assert dead.task_id == future.id
    assert dead.reason == "the message cannot be decoded"
    assert dead.exc_type == "DecodeError"
    assert "written by a newer minitask" in dead.message
    assert future.status() == "failed"
    # kept whole, for a newer worker: requeue_dead() after the upgrade
    with redis_server.client() as client:
        kept = msgpack.unpackb(client.hget(messages, future.id), raw=False)
    assert kept == fields
    app.close()
