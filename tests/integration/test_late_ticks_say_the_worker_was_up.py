"""Ticks a running worker fired late say so, not "no worker was up" (issue 29,
probe29p LOW): on the asyncio pool a task blocking the loop for 3 s, on the thread
pool a task holding its only slot, made the worker log that ticks of an every-second
schedule were "missed (no worker was up)" while it was up all along. Real worker
processes of tests/apps/late_ticks.py on the suite's redis-server; the log is read.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long a task holds the worker (s): ticks of every second fall due meanwhile.
HOLD = 3.0


@pytest.mark.parametrize("pool, task", [("asyncio", "blocks_loop"), ("thread", "holds_slot")])
def test_ticks_a_held_worker_fired_late_say_it_was_up(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        pool: str, task: str) -> None:
    import tests.apps.late_ticks as late
    app = Minitask("late_ticks", broker=redis_server.url)
    for registered in late.app.tasks.values():
        app.task(name=registered.name, queue="late", retries=0)(registered.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.late_ticks", "--pool", pool, "-c", "1", "-Q", "late",
                              env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        deadline = time.monotonic() + DEADLINE
        while "schedule each_second" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        time.sleep(1.5)  # a tick or so fired on time first
        handle = app.tasks[task].delay(HOLD)
        assert handle.get(timeout=DEADLINE) == "done"
        while "missed" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
    finally:
        app.close()
        stop_worker(worker, log)
    text = log.read_text(errors="replace")
    assert "no worker was up" not in text, text[-3000:]
    said = re.search(r"schedule each_second: ticks from \S+ missed \(this worker was up, but "
                     r"looked ([0-9.]+) s late: a task blocked its event loop, or all its "
                     r"slots were busy\); ran the latest", text)
    assert said is not None, text[-3000:]
    assert 1.0 <= float(said.group(1)) <= HOLD + 30, said.group(0)
