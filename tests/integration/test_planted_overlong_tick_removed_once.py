"""A schedule tick whose name is longer than any schedule's, planted in a queue's ticks,
is removed by the worker's first read of its schedules (issue 29, probe 29d's M1).

A 50 MB name in the ``ticks`` sorted set cost Redis about a second every few seconds
(schedule_armed.lua's ZRANGE, then an HSTRLEN and HEXISTS with the name; the worker's
copy of the reply) for as long as it stayed: it was only counted as a tick naming no
record. Now schedule_armed.lua measures each name it reads against
periodic.MAX_NAME_BYTES and removes a longer one there, once; the worker says so in one
line naming the key and the length, never the content, and the listings leave it out.

A real redis-server, a real worker process of tests.apps.foreign, a 5 MB plant.
"""
from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from minitask.broker.keys import queue_keys
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
TIMED = queue_keys("foreign", "timed")
SIZE = 5 << 20
NAME = b"t" * SIZE


def test_a_worker_removes_an_overlong_tick_once_and_keeps_running(
        redis_server: Any, admin: Any, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    from tests.apps.foreign import build
    app = build(redis_server.url)
    log = tmp_path / "worker.log"
    # planted before the worker starts: an idle worker reads its schedules as it starts
    # (and while busy, every REFRESH_MS), not while it waits with nothing due
    admin.zadd(TIMED.ticks, {NAME: 10})
    worker = processes.worker("tests.apps.foreign", "--pool", "thread", "-c", "2", "-Q",
                              "other,timed", env={"MINITASK_BROKER_URL": redis_server.url},
                              log=log)
    try:
        wait_until(lambda: admin.zscore(TIMED.ticks, "hourly") is not None, timeout=DEADLINE,
                   message="the worker's schedule armed")
        wait_until(lambda: admin.zscore(TIMED.ticks, NAME) is None, timeout=DEADLINE,
                   message="the overlong tick removed")
        assert admin.zscore(TIMED.ticks, "hourly") is not None  # the good tick kept
        said = f"key {TIMED.ticks}: a tick whose name is {SIZE:,} bytes"
        wait_until(lambda: said in log.read_text(errors="replace"), timeout=DEADLINE,
                   message="the removal said")
        sound = uuid.uuid4().hex
        app.tasks["mark"].delay(sound)
        wait_until(lambda: sound.encode() in admin.lrange("marks:other", 0, -1),
                   timeout=DEADLINE, message="a task of another queue runs")
        text = log.read_text(errors="replace")
        assert text.count(said) == 1, text[-3000:]  # once: removed, never read again
        assert max(len(line) for line in text.splitlines()) < 20_000
        worker.send_signal(signal.SIGTERM)
        assert exit_code(worker) == 0
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
