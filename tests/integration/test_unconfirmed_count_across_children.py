"""The unconfirmed-writes count a process pool's children share with their supervisor
takes no lock a killed child can leave held, and any process's confirmed write ends
the outage (review29e F2, F3).

F2: the count was guarded by a lock shared by the supervisor and its children;
children are killed at any instruction (time limit, cancel, grace over, OOM), and one
killed holding it left it held: the supervisor's heartbeat, then its stop, blocked
for ever. F3: only the child that had seen the outage ended it (``pending``, per
process); killed or recycled, ``minitask status`` said UNCONFIRMED for good after
the replica was back.

Real worker processes of tests/apps/unconfirmed_children.py on a primary and its
replica; children killed with SIGKILL, the worker stopped with SIGTERM.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.replicas import frozen, in_sync, pair_per_test  # noqa: F401 (a fixture)
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long the replica stays stopped at most.
STALL = 90.0
APP = "tests.apps.unconfirmed_children"


def producer(primary: RedisServer) -> Minitask:
    import tests.apps.unconfirmed_children as children
    app = Minitask("unconfirmed_children", broker=primary.url, visibility_timeout=3.0)
    for task in children.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries)(task.func)
    return app


def workers(primary: RedisServer, cwd: Path) -> List[Dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "minitask", "status", "-A", APP, "--json"],
                          cwd=cwd, capture_output=True, timeout=DEADLINE,
                          env={**os.environ, "MINITASK_BROKER_URL": primary.url})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    found: List[Dict[str, Any]] = json.loads(done.stdout)["workers"]
    return found


def test_a_child_killed_mid_count_never_blocks_its_supervisor(
        pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, _ = pair
    app = producer(primary)
    log, cwd = tmp_path / "worker.log", processes.cwd
    try:
        worker = processes.worker(APP, "--pool", "process", "-c", "2", "--grace", "5",
                                  env={"MINITASK_BROKER_URL": primary.url}, log=log)
        assert app.tasks["pid"].delay().get(timeout=DEADLINE) > 0  # up
        app.tasks["killed"].delay()
        killed_at = time.monotonic()
        assert app.tasks["pid"].delay().get(timeout=DEADLINE) > 0  # served on
        # its heartbeat goes on (it blocked for good at the first after the kill)
        wait_until(lambda: time.monotonic() - killed_at > 6 and all(
            (w["heartbeat_age_s"] or 99) < 4 for w in workers(primary, cwd)),
            timeout=DEADLINE, interval=0.5, message="a fresh heartbeat after the kill")
        stop_worker(worker, log)  # exit 0 within the deadline (it hung, for ever)
    finally:
        app.close()


def test_any_childs_confirmed_write_ends_the_outage(
        pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log, cwd = tmp_path / "worker.log", processes.cwd
    try:
        # one child: the one that saw the outage, then the one that replaced it
        worker = processes.worker(APP, "--pool", "process", "-c", "1",
                                  env={"MINITASK_BROKER_URL": primary.url}, log=log)
        assert app.tasks["pid"].delay().get(timeout=DEADLINE) > 0  # up
        with frozen(replica, STALL):
            seen = app.tasks["pid"].delay().get(timeout=DEADLINE)  # left unconfirmed
            # (the warm-up's too, at times: its WAIT still ran as the replica stopped)
            wait_until(lambda: [bool(w["unconfirmed"]) for w in workers(primary, cwd)] == [
                True], timeout=DEADLINE, message="the heartbeat to count the write")
        wait_until(lambda: in_sync(primary, replica), timeout=DEADLINE,
                   message="the replica to catch up")
        os.kill(seen, signal.SIGKILL)  # the child that saw the outage, gone
        # the others' writes are confirmed: the first ends the outage
        wait_until(lambda: app.tasks["pid"].delay().get(timeout=DEADLINE) != seen and [
            w["unconfirmed"] for w in workers(primary, cwd)] == [0], timeout=DEADLINE,
            interval=0.5, message="the heartbeat to count none unconfirmed")
        assert "replicas confirm this worker's writes again" in log.read_text(
            errors="replace")
        stop_worker(worker, log)
    finally:
        app.close()
