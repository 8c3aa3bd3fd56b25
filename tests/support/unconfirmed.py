"""What the tests of writes replicas did not confirm in time share (real worker
processes of tests/apps/unconfirmed.py on a primary and its replica, the replica
stopped with ``replicas.frozen``): the app on the test's side (``producer``), a worker
of it (``unconfirmed_worker``), outcomes recorded while the replica is stopped
(``plain_outcomes``), the bounds of their waits and what the worker says first."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, List

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer

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
