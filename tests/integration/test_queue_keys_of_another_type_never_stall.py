"""A queue key a fetch writes to holding another type (data minitask did not write)
never stalls the queue, on a real redis-server (issue 29, section 1): a ready list
that a due task or an expired lease goes back to, and the leases key, are moved
aside whole (to ``<key>:foreign``, kept for their owner, said in Redis's log) and
made again, and every task of the queue runs; a real worker process serves the
queue on (before, every fetch of the queue was refused until someone fixed the key).
The keys every fetch, promotion and ack only reads or drops entries from (delayed,
order, deliveries, messages, wake, dead, retrying) of another type stall nothing
either."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

OTHER = queue_keys("foreign", "other")
#: How long a worker may take to start and run tasks on a busy shared machine (s).
DEADLINE = 60.0


@pytest.fixture
def producer(redis_server: RedisServer, admin: "redis.Redis[bytes]",
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)  # (the tasks' marks)
    made = build(redis_server.url)
    try:
        yield made
    finally:
        made.close()


def marks(admin: "redis.Redis[bytes]") -> List[bytes]:
    return admin.lrange("marks:other", 0, -1)


def drain(app: Minitask, admin: "redis.Redis[bytes]", want: List[str],
          within: float = 20.0) -> None:
    """Run the queue's tasks in this process, as a worker does, until ``want`` ran."""
    worker = app.worker(burst=True, queues=["other"])
    deadline = time.monotonic() + within
    rounds = 0
    while rounds < 3 or not set(token.encode() for token in want) <= set(marks(admin)):
        assert time.monotonic() < deadline, (want, marks(admin))
        worker.run_once()  # never refused
        rounds += 1


def test_a_due_task_whose_ready_list_holds_another_type_moves_it_aside(
        producer: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.hset(OTHER.ready[4], "x", "y")  # priority 5's list, a hash
    mark = producer.tasks["mark"]
    mark.apply_async(("due-p5",), delay=0.2, priority=5)
    time.sleep(0.3)
    tokens = [f"p9-{i}" for i in range(3)]
    for token in tokens:
        mark.apply_async((token,), priority=9)  # (its enqueue promotes the due one)
    drain(producer, admin, ["due-p5", *tokens])
    assert admin.hgetall(OTHER.ready[4] + ":foreign") == {b"x": b"y"}  # kept whole


def test_an_expired_lease_whose_ready_list_holds_another_type_moves_it_aside(
        producer: Minitask, admin: "redis.Redis[bytes]") -> None:
    mark = producer.tasks["mark"]
    mark.apply_async(("leased-p5",), priority=5)
    taken = producer.broker.queues.fetch("other", now_ms=producer.clock.now_ms(),
                                         lease_ms=30_000, count=1, max_deliveries=5)
    (delivery,) = taken.deliveries
    admin.zadd(OTHER.leases, {delivery.task_id: 4})  # its worker died long ago
    admin.sadd(OTHER.ready[4], "planted")  # and its list is a set now
    mark.apply_async(("p9",), priority=9)
    drain(producer, admin, ["leased-p5", "p9"])
    assert admin.smembers(OTHER.ready[4] + ":foreign") == {b"planted"}


def test_leases_of_another_type_are_moved_aside(
        producer: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.set(OTHER.leases, "junk")
    tokens = [f"t{i}" for i in range(3)]
    for token in tokens:
        producer.tasks["mark"].delay(token)
    drain(producer, admin, tokens)
    assert admin.get(OTHER.leases + ":foreign") == b"junk"
    assert admin.zcard(OTHER.leases) == 0


@pytest.mark.parametrize("part", ["delayed", "order", "deliveries", "wake", "dead",
                                  "retrying", "messages", "cancelled"])
def test_the_keys_a_fetch_reads_of_another_type_stall_nothing(
        producer: Minitask, admin: "redis.Redis[bytes]", part: str) -> None:
    """Each key of another type, planted after two tasks were sent (one due soon): the
    queue's fetches and acks go on and run what the planted key did not take away."""
    mark = producer.tasks["mark"]
    mark.delay("before")
    mark.apply_async(("later",), delay=0.1)
    key = getattr(OTHER, part)
    admin.delete(key)
    admin.sadd(key, "planted")
    time.sleep(0.2)
    lost = {"messages": ["before", "later"], "delayed": ["later"]}.get(part, [])
    drain(producer, admin, [token for token in ("before", "later") if token not in lost])
    if part != "wake":  # (a fetch that finds every ready list empty drops the wake list)
        assert {b"planted"} in (admin.smembers(key), admin.smembers(key + ":foreign"))


def start_worker(processes: Processes, redis_server: RedisServer, log: Path) -> Any:
    return processes.worker("tests.apps.foreign", "-Q", "other", "--pool", "thread",
                            "--name", "sub1", env={"MINITASK_BROKER_URL": redis_server.url},
                            log=log)


@pytest.mark.parametrize("planted", ["ready", "leases"])
def test_a_worker_serves_the_queue_on(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", producer: Minitask,
        processes: Processes, tmp_path: Path, planted: str) -> None:
    """The probe's M2: a real worker process; before, every fetch of the queue was
    refused (three priority-9 tasks queued until the key was fixed)."""
    log = tmp_path / "worker.log"
    worker = start_worker(processes, redis_server, log)
    first = uuid.uuid4().hex
    producer.tasks["mark"].delay(first)
    wait_until(lambda: first.encode() in marks(admin) or worker.poll() is not None,
               timeout=DEADLINE, message="the worker's first task")
    mark = producer.tasks["mark"]
    if planted == "ready":
        admin.hset(OTHER.ready[4], "x", "y")
        mark.apply_async(("due-p5",), delay=0.3, priority=5)
        time.sleep(0.5)  # due: the worker's next fetch promotes it
        key = OTHER.ready[4]
    else:
        admin.set(OTHER.leases, "junk")
        key = OTHER.leases
    tokens = [f"p9-{i}" for i in range(3)]
    for token in tokens:
        mark.apply_async((token,), priority=9)
    want = {token.encode() for token in tokens} | ({b"due-p5"} if planted == "ready" else set())
    wait_until(lambda: want <= set(marks(admin)) or worker.poll() is not None,
               timeout=DEADLINE, message="the tasks after the planted key")
    assert worker.poll() is None, log.read_text()[-3000:]
    assert want <= set(marks(admin)), log.read_text()[-3000:]
    assert admin.exists(key + ":foreign")  # kept for its owner
    assert "set aside" not in log.read_text()  # the queue was never refused
