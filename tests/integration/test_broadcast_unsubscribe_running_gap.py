"""What docs/guide/broadcast.rst says of ``unsubscribe`` of a *running* worker: the
worker subscribes again at its next look, from the next call sent, so a call sent in
between is not run by that name, and reaches nobody when it was the queue's only
subscriber (its ``join()`` returns ``{}``); calls sent once it is back run. A real
worker process on a test-owned redis-server."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, List

import pytest

from tests.apps.broadcast import QUEUE, producer
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

DEADLINE = 60.0


def _names(app: Any) -> List[str]:
    return [subscriber.name for subscriber in app.subscribers(QUEUE)]


def _until_subscribed(app: Any, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while _names(app) != ["w1"]:
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)


def test_a_call_sent_between_unsubscribe_and_the_next_look_reaches_nobody(
        processes: Processes, start_redis: Any, tmp_path: Path) -> None:
    server: RedisServer = start_redis()
    client = server.client()
    app, note, _ = producer(server.client())
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.broadcast", "--pool", "thread", "--name", "w1",
                              "-Q", QUEUE, env={"MINITASK_BROKER_URL": server.url,
                                                "TEST_SUBSCRIBER": "w1"}, log=log)
    try:
        _until_subscribed(app, log)
        for attempt in range(5):
            assert app.unsubscribe(QUEUE, "w1")
            gap = note.delay(attempt)
            if gap.subscribers() == []:
                break  # sent in the gap (else the worker looked in between: again)
            _until_subscribed(app, log)
        else:
            pytest.fail("the worker subscribed again before every send")
        assert gap.join(timeout=DEADLINE) == {}
        _until_subscribed(app, log)  # its next look: subscribed anew
        after = note.delay(100)
        assert after.join(timeout=DEADLINE) == {"w1": 100}
        ran = [entry.split(b":")[0] for entry in client.lrange("marks:note:w1", 0, -1)]
        assert ran[-1] == b"100" and str(attempt).encode() not in ran, ran
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
