"""The asyncio pool and running-cancel with real worker processes and real signals."""
from __future__ import annotations

import signal
import time
from typing import Any

import pytest
import redis

from minitask import TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


def _worker(processes: Processes, server: RedisServer, *args: str,
            app: str = "tests.apps.aio") -> Any:
    return processes.worker(app, *args, env={"MINITASK_BROKER_URL": server.url,
                                             "TEST_VISIBILITY": "2"})


def _count(client: "redis.Redis[bytes]", pattern: str) -> int:
    return sum(1 for _ in client.scan_iter(pattern, count=1000))


def test_sigkill_of_an_asyncio_worker_mid_run_loses_no_task(
        processes: Processes, server: RedisServer, producer: Any) -> None:
    app, nap = producer
    handles = nap.delay_many([(f"k{i}", 0.05) for i in range(2000)])
    client = server.client()
    first = _worker(processes, server, "--pool", "asyncio", "-c", "200")
    wait_until(lambda: _count(client, "marks:done:*") >= 300, timeout=DEADLINE,
               message="a few hundred tasks done")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert _count(client, "marks:done:*") < 2000  # killed mid-run
    second = _worker(processes, server, "--pool", "asyncio", "-c", "200")
    assert sorted(h.get(timeout=DEADLINE) for h in handles) == sorted(
        f"k{i}" for i in range(2000))
    assert _count(client, "marks:done:*") == 2000
    assert app.broker.queues.counts("default")["running"] == 0
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=DEADLINE) == 0


def test_sigterm_with_grace_lets_running_coroutines_finish(
        processes: Processes, server: RedisServer, producer: Any) -> None:
    app, nap = producer
    handles = nap.delay_many([(f"g{i}", 1.5) for i in range(50)])
    client = server.client()
    worker = _worker(processes, server, "--pool", "asyncio", "-c", "50", "--grace", "20")
    wait_until(lambda: _count(client, "marks:started:*") == 50, timeout=DEADLINE,
               message="all 50 started")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    assert _count(client, "marks:done:*") == 50
    assert [h.status() for h in handles] == ["succeeded"] * 50


@pytest.mark.parametrize("pool", ["process", "asyncio"])
def test_cancel_running_stops_the_attempt_within_a_second(
        processes: Processes, server: RedisServer, producer: Any, pool: str) -> None:
    app, nap = producer
    client = server.client()
    worker = _worker(processes, server, "--pool", pool, "-c", "1")
    handle = nap.delay("long", 30.0)
    wait_until(lambda: client.llen("marks:started:long") == 1, timeout=DEADLINE,
               message="the long task started")
    asked = time.monotonic()
    assert handle.cancel(running=True) is True
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=5)
    stopped_after = time.monotonic() - asked
    assert failed.value.exc_type == "Cancelled"
    # within the bound guide/asyncio states
    assert stopped_after < 1.0, f"stopped after {stopped_after:.2f} s"
    assert handle.status() == "cancelled"
    assert client.llen("marks:done:long") == 0
    # the worker goes on (the process pool with a new child)
    assert nap.delay("next", 0.0).get(timeout=DEADLINE) == "next"
    assert app.broker.queues.counts("default")["running"] == 0
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
