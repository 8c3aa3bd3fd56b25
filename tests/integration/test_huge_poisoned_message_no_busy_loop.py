"""A poisoned task whose message Redis will not send back whole is dead-lettered, at
once and quietly (probe35 M1).

With ``client-output-buffer-limit normal 1mb 0 0`` Redis closes the connection of
every reply over 1 MB. A task of a 3 MB message then had its every fetch cut: its
deliveries counted, the fetch reported it poisoned, and the burial read the whole
message to dead-letter it, a reply Redis cut too. The next fetch reported it again at
once: about 1,000 ERROR lines a second, one core busy, for ever, nothing buried. The
burial reads a large message in pieces (each well below such a limit): the task is
dead-lettered, a plain task of the same queue runs, and the log stays short. On a
redis-server of the test's own (its configuration changed)."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import pytest

from minitask import Minitask, chain
from minitask.broker.keys import QueueKeys
from minitask.worker import Worker
from minitask.worker.outcomes import bury_poisoned
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: How long the worker runs at most (s): the task is dead-lettered within about two
#: leases (1 s each) when the burial works.
WINDOW = 12.0


def test_a_huge_poisoned_message_is_dead_lettered_without_a_busy_loop(
        start_redis: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture) -> None:
    server = start_redis()
    client = server.client()
    client.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    app = Minitask("hugepoison", broker=server.url, max_deliveries=1, visibility_timeout=1,
                   max_message_bytes=8 * 1024 * 1024)
    big = app.task(name="big")(lambda blob: len(blob))
    small = app.task(name="small")(lambda: "ok")
    keys = QueueKeys("hugepoison", "default")
    huge = big.delay("x" * 3_000_000)
    plain = small.delay()
    worker = Worker(app, ["default"], concurrency=1, prefetch=1)
    running = threading.Thread(target=worker.run, daemon=True)
    try:
        with caplog.at_level(logging.ERROR, logger="minitask"):
            running.start()
            deadline = time.monotonic() + WINDOW
            while time.monotonic() < deadline and not (
                    client.zscore(keys.dead, huge.id) is not None
                    and plain.status() == "succeeded"):
                time.sleep(0.05)
            worker.stop()
            running.join(timeout=30)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert not running.is_alive()
        assert len(errors) < 20, (len(errors), errors[:5])
        assert client.zscore(keys.dead, huge.id) is not None, errors[:5]
        assert huge.status() == "failed"
        assert plain.status() == "succeeded"
        assert any("lost the reply to fetch" in line and "client-output-buffer-limit" in line
                   for line in errors), errors[:5]
        said = [line for line in errors if "dead-lettered task " + huge.id in line]
        assert len(said) == 1 and "3,000" in said[0], said
    finally:
        worker.stop()
        running.join(timeout=30)
        app.close()
        client.close()


def test_a_message_too_long_to_read_in_pieces_is_buried_unread(
        start_redis: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the pieces a burial reads (Redis copies the whole message at each), the
    message is measured, not read: buried as it is, the log and its dead letter say
    so (a workflow it is a step of cannot be carried on)."""
    monkeypatch.setattr("minitask.stores.bounds.PIECES_MOST", 2)  # 512 kB, not 8 MiB
    server = start_redis()
    client = server.client()
    app = Minitask("hugeunread", broker=server.url, max_deliveries=5,
                   max_message_bytes=8 * 1024 * 1024)
    big = app.task(name="big")(lambda blob: len(blob))
    keys = QueueKeys("hugeunread", "default")
    try:
        task_id = big.delay("x" * 1_000_000).id
        client.delete(*keys.ready)  # as a fetch leaves it: leased (expired), delivered 5 times
        client.zadd(keys.leases, {task_id: 1})
        client.hset(keys.deliveries, task_id, 5)
        size = client.hstrlen(keys.messages, task_id)
        with caplog.at_level(logging.ERROR, logger="minitask"):
            message, error = bury_poisoned(app, "default", task_id)  # type: ignore[arg-type]
        assert message is None and f"{size:,} bytes, not read" in str(error)
        said = [r.getMessage() for r in caplog.records]
        assert any("is not read" in line and "not carried on" in line for line in said), said
        assert client.zscore(keys.dead, task_id) is not None
    finally:
        app.close()
        client.close()


def test_a_huge_poisoned_workflow_step_ends_its_workflow(
        start_redis: Callable[..., RedisServer]) -> None:
    """Read in pieces, a huge poisoned step's message carries its workflow on: what
    would have followed it is cancelled, as for any step that ends dead."""
    server = start_redis()
    client = server.client()
    client.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    app = Minitask("hugechain", broker=server.url, max_deliveries=5,
                   max_message_bytes=8 * 1024 * 1024)
    big = app.task(name="big")(lambda blob: len(blob))
    small = app.task(name="small")(lambda: "ok")
    keys = QueueKeys("hugechain", "default")
    try:
        last = chain(big.s("x" * 3_000_000), small.si()).delay()
        heads = [member for key in keys.ready for member in client.lrange(key, 0, -1)]
        assert len(heads) == 1
        task_id = heads[0].decode()
        client.delete(*keys.ready)  # as a fetch leaves it: leased (expired), delivered 5 times
        client.zadd(keys.leases, {task_id: 1})
        client.hset(keys.deliveries, task_id, 5)
        message, _ = bury_poisoned(app, "default", task_id)  # type: ignore[arg-type]
        assert message is not None and message.workflow is not None
        assert client.zscore(keys.dead, task_id) is not None
        assert last.status() == "cancelled"
    finally:
        app.close()
        client.close()
