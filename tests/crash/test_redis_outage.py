"""Redis outages: a worker backs off without a busy loop, reconnects when the same server
comes back (persisted with AOF) and resumes without exiting; a producer gets a clear
BrokerError while Redis is away and works again once it is back."""
from __future__ import annotations

import signal
import time
from typing import Callable

import pytest

from minitask import BrokerError
from tests.support.crash_kit import DEADLINE, QUEUE, ClientTasks, Kit, client_tasks
from tests.support.processes import exit_code, send
from tests.support.procfs import cpu_seconds, descendants
from tests.support.servers import RedisServer
from tests.support.waiting import elapsed_since, wait_until

pytestmark = pytest.mark.crash

#: How long Redis stays down: long enough for several failed reconnections.
OUTAGE = 3.0
#: A task running across the outage sleeps this long; its done marker needs Redis back.
ACROSS = OUTAGE + 5.0


def persistent(start_redis: Callable[..., RedisServer]) -> RedisServer:
    """A server whose every write is in its AOF: a restart on its port and dir loses nothing."""
    return start_redis("--appendonly", "yes", "--appendfsync", "always")


@pytest.mark.parametrize("pool", ["process", "thread"])
def test_worker_survives_a_redis_restart_and_resumes(
        start_redis: Callable[..., RedisServer], make_kit: Callable[[RedisServer], Kit],
        pool: str) -> None:
    server = persistent(start_redis)
    kit = make_kit(server)
    worker = kit.worker("--pool", pool, "-c", "2")
    before = kit.tasks.record.delay("before")
    assert before.get(timeout=DEADLINE) == "before"
    # one task runs across the outage; one falls due while Redis is down
    across = kit.tasks.slow.delay("across", ACROSS)
    due = kit.tasks.record.apply_in(1.0, "due-during-outage")
    kit.wait_for_marks("started", "across")
    pool_pids = [worker.pid, *descendants(worker.pid)]
    cpu_before = cpu_seconds(pool_pids)

    server.stop()  # SIGKILL: no shutdown save, the AOF is all that is left
    down_at = time.monotonic()
    while elapsed_since(down_at) < OUTAGE:  # the outage itself, not a synchronisation
        assert worker.poll() is None, "the worker exited while Redis was away"
        time.sleep(0.1)
    cpu_used = cpu_seconds(pool_pids) - cpu_before
    outage = elapsed_since(down_at)
    server.start()  # same port, same directory: the AOF is replayed
    print(f"outage of {outage:.2f} s: the {pool} pool used {cpu_used:.3f} s of CPU")

    assert worker.poll() is None, "the worker exited while Redis was away"
    assert kit.client.hexists(QUEUE.messages, due.id), "the AOF kept the delayed task"
    # A producer that connects now (a producer that was connected before has its own test).
    producer = client_tasks(server.url)
    try:
        after = [producer.record.delay(f"after-{i}") for i in range(5)]
        for index, handle in enumerate(after):
            assert handle.get(timeout=DEADLINE) == f"after-{index}"
    finally:
        producer.app.close()
    wait_until(lambda: kit.marks("done", "due-during-outage"), timeout=DEADLINE,
               message="the task due during the outage to run")
    wait_until(lambda: kit.marks("done", "across"), timeout=DEADLINE,
               message="the task running across the outage to finish")
    kit.wait_until_drained()

    assert worker.poll() is None, "still serving"
    assert len(kit.marks("done", "due-during-outage")) == 1
    assert len(kit.marks("done", "before")) == 1
    # at least once: Redis was away longer than the lease, so a second delivery is allowed
    assert len(kit.marks("done", "across")) >= 1
    assert across.status() == "succeeded"
    assert cpu_used < 0.5 * outage, (
        f"busy loop while Redis was away: {cpu_used:.2f} s of CPU in {outage:.2f} s")
    kit.assert_nothing_left()


def test_connected_producer_enqueues_again_after_a_redis_restart(
        start_redis: Callable[..., RedisServer], make_kit: Callable[[RedisServer], Kit]) -> None:
    server = persistent(start_redis)
    kit = make_kit(server)
    producer = client_tasks(server.url)  # connects as a user's program does
    try:
        first = producer.record.delay("first")  # its connection is now open
        server.stop()
        server.start()  # Redis is back before the producer sends anything again

        second = producer.record.delay("second")

        kit.worker("--pool", "thread", "-c", "2")
        assert first.get(timeout=DEADLINE) == "first"
        assert second.get(timeout=DEADLINE) == "second"
    finally:
        producer.app.close()
    kit.wait_until_drained()
    kit.assert_nothing_left()


def test_producer_gets_a_clear_broker_error_while_redis_is_down(
        start_redis: Callable[..., RedisServer], make_kit: Callable[[RedisServer], Kit]) -> None:
    server = persistent(start_redis)
    kit = make_kit(server)
    producer = client_tasks(server.url)
    try:
        producer.record.delay("first")
        server.stop()

        with pytest.raises(BrokerError) as error:
            producer.record.delay("while-down")
        assert f"127.0.0.1:{server.port}" in str(error.value), "names the broker"

        server.start()
        wait_until(lambda: _enqueues(producer), timeout=DEADLINE,
                   message="the producer to work again")
    finally:
        producer.app.close()
    assert kit.client.hlen(QUEUE.messages) == 2, "the failed enqueue wrote nothing"


def _enqueues(producer: ClientTasks) -> bool:
    try:
        producer.record.delay("back")
    except BrokerError:
        return False
    return True


@pytest.mark.parametrize("pool", ["process", "thread"])
def test_sigterm_while_redis_is_down_still_exits_0(
        start_redis: Callable[..., RedisServer], make_kit: Callable[[RedisServer], Kit],
        pool: str) -> None:
    """The stop signal lands while the worker waits out a backoff pause, not a BLPOP."""
    server = persistent(start_redis)
    kit = make_kit(server)
    worker = kit.worker("--pool", pool, "-c", "1")
    assert kit.tasks.record.delay("before").get(timeout=DEADLINE) == "before"

    server.stop()
    down_at = time.monotonic()
    while elapsed_since(down_at) < 1.5:  # a few failed reconnections, then the signal
        assert worker.poll() is None, "the worker exited while Redis was away"
        time.sleep(0.1)
    send(worker, signal.SIGTERM)

    assert exit_code(worker) == 0
