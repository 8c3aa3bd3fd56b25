"""A huge element planted on a queue's wake list (what idle workers BLPOP) or on a
worker's orders list (what ``minitask shutdown`` pushes to), under real worker
processes on a real redis-server (issue 29). A blocking pop always returns the
element it takes: the bound is that it reaches one worker, once (it is off the
list then), is said in one line naming the key and the element's length (never
its content), and the worker keeps serving: its queues, cancels and orders."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from minitask.broker.keys import AppKeys, queue_keys
from tests.support.aio_workers import aio_worker, sent_bytes
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("aio", "default")
APP_KEYS = AppKeys("aio")
#: Far longer than any token ("1") or order ("shutdown") minitask pushes.
HUGE = 32 * 1024 * 1024
#: What Redis may send in all once the huge element was taken: well under it.
MOST_SENT = HUGE // 4


def blocked_in(client: "redis.Redis[bytes]", command: str) -> int:
    return sum(1 for entry in client.client_list() if entry.get("cmd") == command)


def cancel_a_long_task(client: "redis.Redis[bytes]", nap: Any, key: str, log: Path) -> None:
    handle = nap.delay(key, 30.0)
    wait_until(lambda: client.llen(f"marks:started:{key}") == 1, timeout=DEADLINE,
               message=f"task {key} started")
    assert handle.cancel(running=True) is True
    wait_until(lambda: f"task {handle.id}: stop requested" in log.read_text(), timeout=15,
               message="the worker heard the request")


@pytest.mark.parametrize("pool", ["asyncio", "process"])
def test_a_huge_element_on_a_wake_list_is_taken_once_said_once_and_serving_goes_on(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    client = server.client()
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, pool, log)
    assert nap.delay("warm", 0.0).get(timeout=DEADLINE) == "warm"
    wait_until(lambda: blocked_in(client, "blpop") >= 1, timeout=DEADLINE,
               message="an idle wait is up")
    client.rpush(KEYS.wake, b"\x1b[31m" + b"x" * HUGE)
    wait_until(lambda: client.llen(KEYS.wake) == 0, timeout=DEADLINE,
               message="a worker's wait took the element")
    wait_until(lambda: "held an element no minitask pushes" in log.read_text(),
               timeout=DEADLINE, message="the worker said it")
    before = sent_bytes(client)
    for index in range(5):
        assert nap.delay(f"after{index}", 0.0).get(timeout=DEADLINE) == f"after{index}"
    cancel_a_long_task(client, nap, "long", log)
    assert sent_bytes(client) - before < MOST_SENT  # it reached no client again
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text()
    line = f"minitask key {KEYS.wake} (a wake list) held an element no minitask pushes " \
           f"({HUGE + 5:,} bytes, not shown)"
    assert text.count(line) == 1, text
    assert "xxxxxxxxxx" not in text and "\x1b" not in text, text  # its length, not content
    assert "Traceback" not in text and "internal error" not in text, text


def test_a_huge_order_is_taken_once_said_by_its_length_and_shutdown_still_works(
        processes: Processes, server: RedisServer, nap: Any, tmp_path: Path) -> None:
    client = server.client()
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, "asyncio", log)
    assert nap.delay("warm", 0.0).get(timeout=DEADLINE) == "warm"
    wait_until(lambda: client.zcard(APP_KEYS.workers) == 1, timeout=DEADLINE,
               message="the worker registered")
    worker_id = client.zrange(APP_KEYS.workers, 0, 0)[0].decode()
    control = APP_KEYS.control(worker_id)
    client.rpush(control, b"\x1b]0;" + b"y" * HUGE, b"z" * HUGE)
    wait_until(lambda: client.llen(control) == 0, timeout=DEADLINE,
               message="the listener took both")
    wait_until(lambda: "ignores the unknown order" in log.read_text(), timeout=DEADLINE,
               message="the listener said it")
    before = sent_bytes(client)
    assert nap.delay("after", 0.0).get(timeout=DEADLINE) == "after"
    cancel_a_long_task(client, nap, "long", log)
    client.rpush(control, b"shutdown")  # what minitask shutdown pushes: heard still
    assert worker.wait(timeout=DEADLINE) == 0
    assert sent_bytes(client) - before < MOST_SENT  # neither reached a client again
    text = log.read_text()
    said = (f"worker {worker_id} ignores the unknown order of {HUGE + 4:,} characters "
            f"(not shown) and 1 more (said at most once a minute), taken off {control}")
    assert said in text, text
    assert "yyyyyyyyyy" not in text and "\x1b" not in text, text
    assert "Traceback" not in text and "internal error" not in text, text
