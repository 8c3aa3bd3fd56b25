"""What the tests of writes replicas did not confirm in time share (real worker
processes of tests/apps/unconfirmed.py on a primary and its replica, the replica
stopped with ``replicas.frozen``): the app on the test's side (``producer``), a worker
of it (``unconfirmed_worker``), outcomes recorded while the replica is stopped
(``plain_outcomes``, run by a worker of queue plain: ``plain_worker``,
``ran_unconfirmed``), ``minitask status`` of the app and its workers' unconfirmed
counts (``status``, ``unconfirmed``), the bounds of their waits and what the worker
says first."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long the replica stays stopped at most: longer than the waits asserted during it.
STALL = 90.0
#: What a worker says at the first write of an outage that replicas did not confirm.
FIRST = "Redis wrote but replicas did not confirm it in time"


def producer(primary: RedisServer) -> Minitask:
    """tests.apps.unconfirmed's app on ``primary``. Its sends before the replica is
    stopped are confirmed (10 s: a loaded machine's replica missed a 0.3 s WAIT there);
    those after it send with no wait (the worker's outcomes are the ones unconfirmed,
    within its app's 0.3 s)."""
    import tests.apps.unconfirmed as unconfirmed
    app = Minitask("unconfirmed", broker=primary.url, durability="replicated",
                   min_replicas=1, durability_timeout=10, result_ttl=600)
    for task in unconfirmed.app.tasks.values():
        app.task(name=task.name, queue=task.options.queue)(task.func)
    return app


def unconfirmed_worker(processes: Processes, primary: RedisServer, log: Path, *queues: str,
                       pool: str = "thread", slots: int = 4) -> "subprocess.Popen[bytes]":
    """A worker process of tests.apps.unconfirmed on ``primary`` (``slots`` of ``pool``;
    ``queues``, or every queue of the app), writing ``log``."""
    args = ("-Q", ",".join(queues)) if queues else ()
    return processes.worker("tests.apps.unconfirmed", "--pool", pool, "-c", str(slots), *args,
                            env={"MINITASK_BROKER_URL": primary.url}, log=log)


def plain_outcomes(app: Minitask, count: int) -> List[Any]:
    """Handles of ``plain(1)`` to ``plain(count)``, sent without waiting for replicas:
    sent while the replica is stopped, their outcomes are the worker's writes left
    unconfirmed."""
    return [app.tasks["plain"].apply_async((n,), durability=None)
            for n in range(1, count + 1)]


def plain_worker(processes: Processes, primary: RedisServer, app: Minitask, log: Path,
                 pool: str, slots: int) -> "subprocess.Popen[bytes]":
    """A worker of queue plain (``unconfirmed_worker``), seen serving: ``plain(0)``
    sent by ``app`` (``producer``) ran, its outcome confirmed (the replica up)."""
    worker = unconfirmed_worker(processes, primary, log, "plain", pool=pool, slots=slots)
    assert app.tasks["plain"].delay(0).get(timeout=DEADLINE) == 0  # up, confirmed
    return worker


def ran_unconfirmed(app: Minitask, count: int) -> None:
    """Send ``plain_outcomes(app, count)`` and wait until each ran (succeeded): sent while
    the replica is stopped, the worker's outcome writes left unconfirmed."""
    handles = plain_outcomes(app, count)
    wait_until(lambda: all(h.status() == "succeeded" for h in handles),
               timeout=DEADLINE, message="the tasks to run, replica stopped")


def status(primary: RedisServer, cwd: Path, *more: str) -> str:
    """What ``minitask status`` (and ``more`` of its options) of tests.apps.unconfirmed
    on ``primary`` prints, run in ``cwd``; it must succeed."""
    done = subprocess.run([sys.executable, "-m", "minitask", "status", "-A",
                           "tests.apps.unconfirmed", *more], cwd=cwd, capture_output=True,
                          env={**os.environ, "MINITASK_BROKER_URL": primary.url},
                          timeout=DEADLINE)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace")


def unconfirmed(primary: RedisServer, cwd: Path) -> List[Any]:
    """Each live worker's count of unconfirmed writes (its heartbeat's), as ``minitask
    status --json`` reports them."""
    report: Dict[str, Any] = json.loads(status(primary, cwd, "--json"))
    return [worker.get("unconfirmed") or 0 for worker in report["workers"]]
