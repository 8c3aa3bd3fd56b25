"""A process pool child started while Redis is away waits for Redis, as its fetch
does, and a child that keeps dying as it starts is replaced with a growing delay,
said once: real workers, a real redis-server stopped and started again, children
killed with SIGKILL.

Before (issue 29, H1), a child's first step, saying its leases (``Leases.say``), ran
outside the outage handling: the child started in place of one SIGKILLed during an
outage died of it at once (exit code 1, a traceback), was replaced at once, and so
on: 291 children and 1.2 MB of tracebacks in 10 s. And a child that died at start
for any reason was replaced at once, for ever, hundreds of times a second.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send
from tests.support.procfs import descendants
from tests.support.waiting import elapsed_since, wait_until

pytestmark = pytest.mark.crash

#: How long Redis stays down after the child is killed (s): many a fork's time.
OUTAGE = 3.0
#: How long the test watches children die as they start (s).
WATCHED = 3.0


def said(log: Path, text: str) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if text in line)


def test_a_child_started_in_an_outage_waits_for_redis(kit: Kit) -> None:
    worker = kit.worker("--pool", "process", "-c", "2")
    log = kit.logs / "worker-0.log"
    assert kit.tasks.record.delay("before").get(timeout=DEADLINE) == "before"
    wait_until(lambda: len(descendants(worker.pid)) == 2, timeout=DEADLINE,
               message="the worker's two children")
    before = log.stat().st_size

    kit.server.stop()
    wait_until(lambda: said(log, "lost Redis"), timeout=DEADLINE,
               message="the worker to say it lost Redis")
    victim = descendants(worker.pid)[0]
    send_kill = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in descendants(worker.pid) and len(
        descendants(worker.pid)) == 2, timeout=DEADLINE, message="the child replaced")
    while elapsed_since(send_kill) < OUTAGE:  # the outage itself, not a synchronisation
        assert worker.poll() is None, "the worker exited while Redis was away"
        time.sleep(0.1)
    children = descendants(worker.pid)
    grown = log.stat().st_size - before
    kit.server.start()  # same port: the worker reconnects

    handles = [kit.tasks.record.delay(f"after-{i}") for i in range(10)]
    assert [h.get(timeout=DEADLINE) for h in handles] == [f"after-{i}" for i in range(10)]
    for i in range(10):
        assert len(kit.marks("done", f"after-{i}")) == 1
    assert descendants(worker.pid) == children, "a child died after the outage"
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0

    text = log.read_text(errors="replace")
    assert said(log, "exited with code") == 1, text[-3000:]  # the one killed, no other
    assert "Traceback" not in text, text[-3000:]
    assert grown < 4000, f"{grown} bytes logged over the outage:\n{text[-3000:]}"


def test_children_dying_at_start_are_replaced_with_a_growing_delay(kit: Kit) -> None:
    flag = kit.logs / "die"
    flag.touch()
    worker = kit.worker("--pool", "process", "-c", "1", app="tests.apps.dying_at_start",
                        TEST_DIE_AT_START=str(flag))
    log = kit.logs / "worker-0.log"
    wait_until(lambda: said(log, "exited with code 1"), timeout=DEADLINE,
               message="the first child to die as it starts")
    started = time.monotonic()
    while elapsed_since(started) < WATCHED:
        assert worker.poll() is None, "the worker exited while its children died"
        time.sleep(0.1)
    deaths = len(flag.read_text().splitlines())
    # 0, 0.1, 0.2, 0.4... 5 s apart: about 7 in 3 s, and 10 in 10 s should the machine
    # stall the test; replaced at once, a child dies every few tens of milliseconds
    assert 2 <= deaths <= 15, f"{deaths} children died at start in {WATCHED} s"

    flag.unlink()  # the next child starts (within the longest delay)
    assert kit.tasks.record.delay("served").get(timeout=DEADLINE) == "served"
    wait_until(lambda: said(log, "children start again"), timeout=DEADLINE,
               message="the worker to say its children start again")
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0
    text = log.read_text(errors="replace")
    # the first death as any other's, then the row once (as it starts, as it ends)
    assert said(log, "exited with code 1 between tasks") == 1, text[-3000:]
    assert said(log, "children keep dying as they start") == 1, text[-3000:]
    assert said(log, "children start again") == 1, text[-3000:]
