"""A broadcast call leased in the same wait as a refused fetch runs at once: a real
worker on a real redis-server, subscribed to a broadcast queue behind a queue whose
leases hold data minitask did not write, runs the call on its first delivery.

Before (review 11, F3), the wait raised the fetch's error and dropped the replies of
the broadcast pulls sent before it: the call stayed leased to nobody until its lease
expired, and ran on a second delivery.
"""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable, List

import pytest

from minitask.broker.keys import QueueKeys
from tests.apps.broadcast import producer
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
A = QueueKeys("bcast", "a")


def test_a_broadcast_pulled_beside_a_refused_fetch_runs_on_its_first_delivery(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    server = start_redis()
    client = server.client()
    app, note, _ = producer(server.client())
    log = tmp_path / "worker.log"
    worker = processes.worker(
        "tests.apps.broadcast", "--name", "s1", "--pool", "thread", "-c", "1", "-Q", "a,fan",
        env={"MINITASK_BROKER_URL": server.url, "TEST_SUBSCRIBER": "s1",
             "TEST_VISIBILITY": "4"}, log=log)

    def marks() -> List[List[str]]:
        return [raw.decode().split(":") for raw in client.lrange("marks:note:s1", 0, -1)]

    wait_until(lambda: {s.name for s in app.subscribers("fan")} >= {"s1"}, timeout=DEADLINE,
               message="subscribed")
    note.delay(1)
    wait_until(lambda: len(marks()) == 1, timeout=DEADLINE, message="the warm call ran")
    time.sleep(1.0)  # idle: in its wait, with the fetch of 'a' behind it
    client.set(A.leases, b"someone's string")
    note.delay(2)
    wait_until(lambda: len(marks()) == 2, timeout=DEADLINE, message="the second call ran")
    n, _, _, delivery = marks()[1]
    assert (n, delivery) == ("2", "1"), marks()
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    client.close()
    app.close()
