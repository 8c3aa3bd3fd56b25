"""An outcome written again after its first write's reply was lost does not blame Redis.

A worker that stalls past its connection's socket timeout (SIGSTOPped, a long task
holding the GIL, a slow link) gives up on its outcome's write client-side though Redis
ran it; written again, the outcome finds no lease, that first write having removed it.
The worker said "Redis no longer held its lease ... Redis lost it, likely with the rest
of the task's data (a restart without persistence, a failover...)": a data loss that
never happened (issue 29, probe35 M5). A real redis-server behind a proxy that withholds
the first outcome write's reply (Redis runs it): the worker's socket timeout gives up,
the write is made again, the log says the first write most likely recorded it, and the
task's result is recorded once.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from minitask import Minitask
from tests.support.cutting import CuttingProxy
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: What the task returns: found in its outcome's write alone (sent to Redis directly).
TEXT = "a-reply-withheld-" + uuid.uuid4().hex
DEADLINE = 60.0


# the thread pool's recording step; the asyncio pool's, written from its event loop
# (``LoopAcks``: its link's timeout), then again by a recording thread
@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_an_outcome_whose_first_reply_was_lost_is_not_said_lost_by_redis(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path,
        pool: str) -> None:
    server = start_redis()
    proxy = CuttingProxy(server)
    log = tmp_path / "worker.log"
    app = Minitask("basic", broker=server.url)
    try:
        processes.worker("tests.apps.basic", "--pool", pool, "-c", "1",
                         env={"MINITASK_BROKER_URL": proxy.url + "?socket_timeout=1"},
                         log=log)
        # a first task loads the outcome's scripts: the write held is one that runs
        # (not an EVALSHA Redis answers NOSCRIPT)
        first = app.send("tests.apps.basic.chatty", args=("first",))
        assert first.get(timeout=DEADLINE) == "first"
        proxy.hold_reply_to(TEXT.encode())
        handle = app.send("tests.apps.basic.chatty", args=(TEXT,))
        assert handle.get(timeout=DEADLINE) == TEXT
        deadline = time.monotonic() + DEADLINE
        while "recorded by that write" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        assert proxy.holds == 1, text
        assert "recorded by that write" in text, text
        assert "Redis lost it" not in text and "no longer held its lease" not in text, text
        assert "had expired" not in text, text
        client = server.client()
        try:
            results = [key for key in client.scan_iter(match=b"*result*")
                       if client.type(key) == b"list"]
            assert sorted(client.llen(key) for key in results) == [1, 1], results
        finally:
            client.close()
    finally:
        app.close()
        proxy.close()
