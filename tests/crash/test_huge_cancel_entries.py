"""A huge entry planted in a queue's ``cancels`` stream (issue 29: a 50-100 MB field was
read whole by request_cancel.lua at every ``cancel(running=True)``, 0.4-0.55 s of Redis
each, and by every worker's cancel watch at each start). Asserted on what Redis did,
not on wall-clock times: the bytes it sent (INFO stats) and its time per XREVRANGE
(INFO commandstats), on a real redis-server, with real worker processes."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.aio_workers import aio_worker, sent_bytes
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("aio", "default")
#: The planted field: far longer than any entry minitask writes (a task id: 200 bytes).
HUGE = 32 * 1024 * 1024
#: What a test may make Redis send in all while the huge entry is there: well under it.
MOST_SENT = HUGE // 4


def watching(client: "redis.Redis[bytes]", count: int) -> bool:
    """Whether ``count`` clients are blocked in an XREAD (the workers' cancel watches):
    blocked (flag b), so that the reply of the XREAD before (a huge entry) has been
    read whole, not still on its way (Redis counts its bytes sent as they go)."""
    return sum(1 for entry in client.client_list()
               if entry.get("cmd") == "xread" and "b" in entry.get("flags", "")) >= count


def stop_a_long_task(client: "redis.Redis[bytes]", nap: Any, key: str, *logs: Path) -> None:
    """Send a 30 s task and cancel it once it runs: the worker running it (its log one of
    ``logs``) hears the request."""
    handle = nap.delay(key, 30.0)
    wait_until(lambda: client.llen(f"marks:started:{key}") == 1, timeout=DEADLINE,
               message=f"task {key} started")
    assert handle.cancel(running=True) is True
    wait_until(lambda: any(f"task {handle.id}: stop requested" in log.read_text()
                           for log in logs if log.exists()),
               timeout=15, message="the worker heard the request")


def stop(worker: Any) -> None:
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0


def test_request_cancel_never_reads_the_streams_last_entry(server: RedisServer) -> None:
    """request_cancel.lua looked at the stream's last entry (XREVRANGE + - COUNT 1) to
    see whether its id was planted: with a huge field there, each request copied it
    inside Redis. It reads only entries past any id minitask writes now."""
    client = server.client()
    app = Minitask("aio", broker=server.client())
    try:
        client.zadd(KEYS.leases, {"leased": 2 ** 50})  # a lease no worker reaps (no worker)
        assert app.broker.cancels.request("default", "leased") is True  # the script loaded
        client.config_resetstat()
        before = sent_bytes(client)
        for _ in range(3):  # planted again before each request: the last entry each time
            client.xadd(KEYS.cancels, {b"planted": b"x" * HUGE})
            assert app.broker.cancels.request("default", "leased") is True
        stats = client.info("commandstats")["cmdstat_xrevrange"]
        assert stats["calls"] == 3
        # a 32 MB entry copied inside Redis took tens of ms per call; now none is read
        # (1 ms: a bound a busy machine keeps, many times what such a call costs)
        assert stats["usec_per_call"] < 1000, stats
        assert sent_bytes(client) - before < MOST_SENT
        assert client.xlen(KEYS.cancels) == 7  # 1 + 3 requests, 3 planted entries, left
    finally:
        app.close()


@pytest.mark.parametrize("pool", ["asyncio", "process"])
def test_a_huge_entry_planted_before_workers_start_is_never_sent_to_them(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    """A watch found where the stream ends by reading its last entry whole (each process
    of each worker, at each start): it adds a wake-up entry and takes its id now."""
    client = server.client()
    client.xadd(KEYS.cancels, {b"planted": b"x" * HUGE})
    before = sent_bytes(client)
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, pool, log)
    wait_until(lambda: watching(client, 2 if pool == "process" else 1), timeout=DEADLINE,
               message="the worker's cancel watches are up")
    assert nap.delay("warm", 0.0).get(timeout=DEADLINE) == "warm"
    stop_a_long_task(client, nap, "first", log)
    assert sent_bytes(client) - before < MOST_SENT
    stop(worker)


@pytest.mark.parametrize("pool", ["asyncio", "process"])
def test_a_huge_entry_planted_under_watching_workers_is_read_once_and_deleted(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    """An XREAD cannot leave a field out: each watch blocked on the stream gets the entry
    once. The first deletes it, said in one line naming the key; no later watch, worker
    or request reads it again, and cancel(running=True) works on."""
    client = server.client()
    each = 2 if pool == "process" else 1  # watches per worker: a child's each, or its own
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    workers = [aio_worker(processes, server, pool, log) for log in logs]
    wait_until(lambda: watching(client, 2 * each), timeout=DEADLINE,
               message="both workers' cancel watches are up")
    planted = client.xadd(KEYS.cancels, {b"planted": b"x" * HUGE, b"id": b"not-a-task"})
    wait_until(lambda: not client.xrange(KEYS.cancels, planted, planted), timeout=DEADLINE,
               message="a watch deleted the planted entry")
    wait_until(lambda: watching(client, 2 * each), timeout=DEADLINE,
               message="both workers' watches wait again")
    before = sent_bytes(client)
    assert nap.delay("after", 0.0).get(timeout=DEADLINE) == "after"
    stop_a_long_task(client, nap, "first", *logs)
    third = tmp_path / "three.log"
    workers.append(aio_worker(processes, server, pool, third))  # reads from the end
    wait_until(lambda: watching(client, 3 * each), timeout=DEADLINE,
               message="the third worker's watch is up")
    stop_a_long_task(client, nap, "second", *logs, third)
    assert sent_bytes(client) - before < MOST_SENT  # the entry never reached a client again
    for worker in workers:
        stop(worker)
    text = "".join(log.read_text() for log in [*logs, third])
    said = text.count(f"{KEYS.cancels}: entry {planted.decode()} is no cancel request")
    assert said == 1, text
    assert "x" * 100 not in text  # its length is said, never its content
    assert "internal error" not in text and "Traceback" not in text, text
