"""One Redis outage is one ERROR line ("lost Redis") and one line saying Redis is
back, per worker, on every pool: a process pool's children ride it quietly, their
supervisor says it for the worker (as the thread and asyncio pools' threads do)."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send
from tests.support.waiting import elapsed_since, wait_until

pytestmark = pytest.mark.crash

#: How long Redis stays down (s): several failed reconnections of every process.
OUTAGE = 2.0
#: Connections blocked in a BLPOP once the worker is idle: its waits for tasks (a
#: process pool's, one per child) and its supervisor's or own orders listener.
IDLE_WAITS = {"process": 3, "thread": 2, "asyncio": 2}


def said(log: Path, text: str) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if text in line)


@pytest.mark.parametrize("pool", ["process", "thread", "asyncio"])
def test_one_outage_is_said_once_each_way(kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "2")
    log = kit.logs / "worker-0.log"
    assert kit.tasks.record.delay("before").get(timeout=DEADLINE) == "before"
    # every process of the pool waits on Redis: each of them meets the outage
    wait_until(lambda: kit.blocked_in("blpop") >= IDLE_WAITS[pool], timeout=DEADLINE,
               message="every wait of the idle worker")

    kit.server.stop()
    down_at = time.monotonic()
    wait_until(lambda: said(log, "lost Redis"), timeout=DEADLINE,
               message="the worker to say it lost Redis")
    while elapsed_since(down_at) < OUTAGE:  # the outage itself, not a synchronisation
        assert worker.poll() is None, "the worker exited while Redis was away"
        time.sleep(0.1)
    kit.server.start()  # same port: the worker reconnects

    assert kit.tasks.record.delay("after").get(timeout=DEADLINE) == "after"
    wait_until(lambda: said(log, "Redis is back"), timeout=DEADLINE,
               message="the worker to say Redis is back")
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0

    lost = [line for line in log.read_text().splitlines() if "lost Redis" in line]
    assert len(lost) == 1 and " ERROR " in lost[0], "\n".join(lost)
    assert said(log, "Redis is back") == 1
