"""``get()`` on a queued task whose result key holds a string (data minitask did not
write) raised a BrokerError naming a key pattern (``minitask:{app:queue}:*``), and
``aget()`` one saying "check that the server is running": both now name the key, the
task (name and id) and the problem, and say what to do. What they say is true: a real
worker's outcome replaces the key whole, and the wait then returns the value."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from minitask import DecodeError, Minitask
from tests.support.lost_steps import (  # noqa: F401 (producer, server: fixtures)
    DEADLINE, KEYS, producer, server)
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_get_and_aget_name_the_planted_result_key_the_task_and_the_problem(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    handle = producer.tasks["add"].delay(2, 3)
    key = KEYS.result(handle.id)
    client.set(key, "planted")
    assert handle.status() == "queued"

    async def awaited() -> None:
        try:
            await handle.aget(timeout=DEADLINE)
        finally:
            await producer.aclose()

    for wait in (lambda: handle.get(timeout=DEADLINE), lambda: asyncio.run(awaited())):
        with pytest.raises(DecodeError) as refused:
            wait()
        said = str(refused.value)
        for part in (key, "'add'", handle.id, "holds a string", "did not write",
                     "delete the key"):
            assert part in said, said
        assert "minitask:{app:queue}" not in said and "server is running" not in said
    assert client.get(key) == b"planted"  # left as it is
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.lost_steps", "--pool", "thread",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    try:
        # the outcome replaces the key whole, as the error says
        deadline = time.monotonic() + DEADLINE
        while client.type(key) == b"string":
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        assert handle.get(timeout=DEADLINE) == 5
    finally:
        stop_worker(worker, log)
