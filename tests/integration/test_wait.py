"""An idle worker's wait: a BLPOP with a fetch sent behind it, on a real redis-server.

The fetch runs when the BLPOP is served, or when the wait's own timer (or a
stop) ends it with CLIENT UNBLOCK; either way its reply is read, so a task it
leases always reaches the worker.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, List, Optional

import pytest

from minitask import Minitask, Task
from minitask.stores.queue import FetchResult, FetchTerms
from minitask.broker.waits import MAX_BLOCK_SECONDS
from minitask.worker import Worker
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app("waiting", on="server")]

TERMS = FetchTerms(lease_ms=60_000, count=1, max_deliveries=5)
#: A script that keeps Redis busy for a second.
BUSY_FOR_A_SECOND = """
local start = redis.call('TIME')
local now = start
while (now[1] - start[1]) * 1000000 + (now[2] - start[2]) < 1000000 do
  now = redis.call('TIME')
end
"""
#: Far longer than any of these waits takes when it works, far shorter than a BLPOP's.
PROMPT = MAX_BLOCK_SECONDS - 1.5


@pytest.fixture(autouse=True)
def job(app: Minitask) -> Task[[int], int]:
    """The task the waits below fetch, registered on the test's app as "job"."""
    @app.task(name="job")
    def job(n: int) -> int:
        return n

    return job


def server_ms(admin: Any) -> int:
    seconds, micros = admin.time()
    return int(seconds) * 1000 + int(micros) // 1000


def blocked_clients(admin: Any) -> int:
    return int(admin.info("clients")["blocked_clients"])


def test_a_woken_wait_returns_the_task_leased_on_the_server_clock(
        app: Minitask, admin: Any) -> None:
    results: List[Optional[FetchResult]] = []
    waiting = threading.Thread(target=lambda: results.append(
        app.broker.queues.wait(["default"], 20.0, then_fetch=TERMS)))
    waiting.start()
    wait_until(lambda: blocked_clients(admin) == 1, timeout=10, message="a blocked wait")
    before = server_ms(admin)
    handle = app.tasks["job"].delay(7)
    waiting.join(timeout=10)
    after = server_ms(admin)

    assert not waiting.is_alive()
    result = results[0]
    assert result is not None
    assert [d.task_id for d in result.deliveries] == [handle.id]
    assert result.deliveries[0].delivery == 1
    deadline = int(admin.zscore(app.broker.queues.keys("default").leases, handle.id)) // 10
    assert before + TERMS.lease_ms <= deadline <= after + TERMS.lease_ms
    assert blocked_clients(admin) == 0


def test_a_wait_whose_timer_runs_out_fetches_then_and_leaves_no_blpop_behind(
        app: Minitask, admin: Any) -> None:
    handle = app.tasks["job"].delay(1)
    admin.delete(app.broker.queues.keys("default").wake)  # ready, but nothing to wake a worker

    started = time.monotonic()
    result = app.broker.queues.wait(["default"], 0.2, then_fetch=TERMS)
    elapsed = time.monotonic() - started

    assert result is not None
    assert [d.task_id for d in result.deliveries] == [handle.id]
    assert 0.2 <= elapsed < PROMPT
    assert blocked_clients(admin) == 0


def test_a_rung_interrupt_ends_the_wait_at_once(app: Minitask, admin: Any) -> None:
    heard, rung = socket.socketpair()
    try:
        timer = threading.Timer(0.2, lambda: rung.send(b"!"))
        timer.start()
        started = time.monotonic()
        result = app.broker.queues.wait(["default"], 30.0, then_fetch=TERMS,
                                        interrupt=heard.fileno())
        elapsed = time.monotonic() - started
        timer.join()
    finally:
        heard.close()
        rung.close()
    assert result is not None and result.deliveries == []
    assert elapsed < PROMPT
    assert blocked_clients(admin) == 0


def test_a_wait_after_a_script_flush_loads_the_fetch_script_again(
        app: Minitask, admin: Any) -> None:
    handle = app.tasks["job"].delay(2)
    admin.script_flush()

    result = app.broker.queues.wait(["default"], 10.0, then_fetch=TERMS)

    assert result is not None
    assert [d.task_id for d in result.deliveries] == [handle.id]


@pytest.mark.parametrize("refused", ["client|unblock", "client|id", "time"])
def test_without_what_it_needs_a_wait_falls_back_and_leases_nothing_for_nobody(
        redis_server: RedisServer, admin: Any, caplog: pytest.LogCaptureFixture,
        refused: str) -> None:
    admin.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["minitask:*"],
                      commands=["+@all", f"-{refused}"])
    app = Minitask("waiting", broker=f"redis://limited:secret@127.0.0.1:{redis_server.port}/0")
    job = app.task(lambda n: n, name="job")
    try:
        with caplog.at_level(logging.WARNING, logger="minitask.broker.waits"):
            first = app.broker.queues.wait(["default"], 0.2, then_fetch=TERMS)
        assert first is None  # the caller fetches itself
        assert f"'{refused}'" in caplog.text  # Redis's refusal, quoted in the warning
        handle = job.delay(3)
        # a plain wait, woken by the task, with no fetch behind it
        assert app.broker.queues.wait(["default"], 10.0, then_fetch=TERMS) is None
        assert admin.zcard(app.broker.queues.keys("default").leases) == 0
        fetched = app.broker.queues.fetch("default", now_ms=server_ms(admin), lease_ms=60_000,
                                          count=1, max_deliveries=5)
        assert [d.task_id for d in fetched.deliveries] == [handle.id]
    finally:
        app.close()
        admin.acl_deluser("limited")


def test_a_rung_interrupt_still_returns_what_the_fetch_leased(
        app: Minitask, admin: Any) -> None:
    handle = app.tasks["job"].delay(4)
    admin.delete(app.broker.queues.keys("default").wake)
    heard, rung = socket.socketpair()
    try:
        rung.send(b"!")
        result = app.broker.queues.wait(["default"], 30.0, then_fetch=TERMS,
                                        interrupt=heard.fileno())
    finally:
        heard.close()
        rung.close()
    assert result is not None
    assert [d.task_id for d in result.deliveries] == [handle.id]


def test_an_idle_wait_ends_on_the_blpop_timeout_without_client_unblock(
        app: Minitask, admin: Any) -> None:
    def unblocks() -> int:
        stats = admin.info("commandstats").get("cmdstat_client|unblock", {})
        return int(stats.get("calls", 0))

    app.broker.queues.wait(["default"], 0.0, then_fetch=TERMS)  # asks once what the server allows
    before = unblocks()
    result = app.broker.queues.wait(["default"], MAX_BLOCK_SECONDS, then_fetch=TERMS)
    assert result is not None and result.deliveries == []
    assert unblocks() == before


def test_a_busy_server_refusing_client_unblock_loses_nothing(
        app: Minitask, admin: Any) -> None:
    """While a slow script runs, Redis answers CLIENT UNBLOCK with BUSY: the wait then
    ends on its BLPOP's own timeout, and the task its fetch leased is returned."""
    handle = app.tasks["job"].delay(5)
    admin.delete(app.broker.queues.keys("default").wake)
    admin.config_set("lua-time-limit", 100)
    heard, rung = socket.socketpair()
    results: List[Optional[FetchResult]] = []
    waiting = threading.Thread(target=lambda: results.append(app.broker.queues.wait(
        ["default"], 30.0, then_fetch=TERMS, interrupt=heard.fileno())))
    slow = threading.Thread(target=lambda: admin.eval(BUSY_FOR_A_SECOND, 0))
    try:
        waiting.start()
        wait_until(lambda: blocked_clients(admin) == 1, timeout=10, message="a blocked wait")
        slow.start()
        time.sleep(0.3)  # past lua-time-limit: Redis now answers BUSY
        rung.send(b"!")
        waiting.join(timeout=MAX_BLOCK_SECONDS + 10)
        slow.join(timeout=10)
    finally:
        heard.close()
        rung.close()
        admin.config_set("lua-time-limit", 5000)
    assert not waiting.is_alive()
    result = results[0]
    assert result is not None
    assert [d.task_id for d in result.deliveries] == [handle.id]
    # and the next wait still has its fetch behind it
    assert app.broker.queues.wait(["default"], 0.1, then_fetch=TERMS) is not None


def test_stop_from_another_thread_ends_an_idle_worker_at_once(
        app: Minitask, admin: Any) -> None:
    worker = Worker(app, ["default"], concurrency=2)
    running = threading.Thread(target=worker.run)
    running.start()
    # the dispatcher's BLPOP, the listener for orders (minitask shutdown) and the XREAD
    # of the cancel watch
    wait_until(lambda: blocked_clients(admin) == 3, timeout=10, message="an idle worker")

    started = time.monotonic()
    worker.stop()
    running.join(timeout=10)

    assert not running.is_alive()
    assert time.monotonic() - started < PROMPT
    assert blocked_clients(admin) == 0
