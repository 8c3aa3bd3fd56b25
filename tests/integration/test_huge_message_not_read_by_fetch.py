"""A planted message longer than max_message_bytes (minitask never writes one) is
measured by the fetch (HSTRLEN) and never read, on a real redis-server (issue 29,
section 3): the fetch leases a short mark in its place, and a real worker
dead-letters it with a reason naming its size, then runs the queue's next task.
Before, the fetch copied it whole (a planted 200 MB message blocked Redis for
650 ms and grew the worker by 180 MB before it was dead-lettered)."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.errors import DecodeError
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

OTHER = queue_keys("foreign", "other")
#: Over the app's max_message_bytes (1 MiB by default), and light enough for a test.
SIZE = 8 * 1024 * 1024
#: How long a worker may take to start and run a task on a busy shared machine (s).
DEADLINE = 60.0


@pytest.fixture
def producer(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = build(redis_server.url)
    try:
        yield made
    finally:
        made.close()


def plant(admin: "redis.Redis[bytes]", task_id: str = "huge", priority: int = 5) -> None:
    admin.hset(OTHER.messages, task_id, b"\x1b" * SIZE)
    admin.rpush(OTHER.ready[9 - priority], task_id)
    admin.rpush(OTHER.wake, "1")


def test_the_fetch_leases_a_mark_in_place_of_a_message_too_long(
        producer: Minitask, admin: "redis.Redis[bytes]") -> None:
    plant(admin)
    taken = producer.broker.queues.fetch(
        "other", now_ms=producer.clock.now_ms(), lease_ms=30_000, count=1, max_deliveries=5,
        max_bytes=producer.max_message_bytes)
    (delivery,) = taken.deliveries
    assert delivery.task_id == "huge" and len(delivery.body) < 40
    with pytest.raises(DecodeError, match=f"{SIZE:,} bytes, longer than this worker's "
                                          f"max_message_bytes"):
        delivery.message()
    assert admin.hstrlen(OTHER.messages, "huge") == SIZE  # kept, unread


def test_a_message_as_long_as_allowed_is_read(producer: Minitask,
                                              admin: "redis.Redis[bytes]") -> None:
    plant(admin)
    taken = producer.broker.queues.fetch(
        "other", now_ms=producer.clock.now_ms(), lease_ms=30_000, count=1, max_deliveries=5,
        max_bytes=SIZE)
    assert len(taken.deliveries[0].body) == SIZE


def test_a_worker_dead_letters_it_unread_and_runs_the_next_task(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", producer: Minitask,
        processes: Processes, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.foreign", "-Q", "other", "--pool", "thread",
                              "--name", "sub1", env={"MINITASK_BROKER_URL": redis_server.url},
                              log=log)
    plant(admin)
    token = uuid.uuid4().hex
    producer.tasks["mark"].apply_async((token,), priority=0)  # after the planted one
    wait_until(lambda: token.encode() in admin.lrange("marks:other", 0, -1)
               or worker.poll() is not None, timeout=DEADLINE, message="the next task")
    assert worker.poll() is None, log.read_text()[-3000:]
    (letter,) = producer.dead_letters("other")
    assert letter.task_id == "huge"
    assert f"{SIZE:,} bytes" in letter.message, letter.message
    assert admin.hstrlen(OTHER.messages, "huge") == SIZE  # kept for inspection


def test_a_poisoned_task_whose_message_is_too_long_is_dead_lettered_unread(
        producer: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A lease expired max_deliveries times: the worker reads its message to
    dead-letter it, measured first (``message_body``: too large, not read)."""
    admin.hset(OTHER.messages, "huge", b"\x1b" * SIZE)
    admin.zadd(OTHER.leases, {"huge": 4})  # expired long ago, at priority 5
    admin.hset(OTHER.deliveries, "huge", 99)
    queues = producer.broker.queues
    with pytest.raises(DecodeError, match="too large"):
        queues.message_body("other", "huge")  # (bounds.message_of: measured, not read)
    worker = producer.worker(burst=True, queues=["other"])
    worker.run_once()
    (letter,) = producer.dead_letters("other")
    assert letter.task_id == "huge" and letter.reason == "worker lost"
