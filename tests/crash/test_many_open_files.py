"""Many open files: minitask keeps working when its sockets get descriptors >= 1024.

``select.select`` refuses descriptors from FD_SETSIZE (1024) up, and a process
that holds many files (a web server, a task keeping files open) is handed such
numbers for every new socket. Each test runs minitask in a process that holds
1,100 open files first, so all of its Redis connections are above the limit.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.paths import ROOT
from tests.support.procfs import descendants, pid_running

pytestmark = pytest.mark.crash

HELD = 1100
#: Above every descriptor a process has before it opens the 1,100 files.
FD_SETSIZE = 1024


def high_sockets(pid: int) -> List[int]:
    """The socket descriptors of ``pid`` numbered FD_SETSIZE or more."""
    found = []
    for entry in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{entry}")
        except FileNotFoundError:
            continue  # closed meanwhile
        if int(entry) >= FD_SETSIZE and target.startswith("socket:"):
            found.append(int(entry))
    return found


PRODUCER = textwrap.dedent("""
    import threading

    from tests.apps.many_files import hold_files
    hold_files({held})

    from minitask import Worker
    from tests.apps.basic import add, app

    handle = add.delay(2, 3)
    fd = app.broker.transport.connections.own()._sock.fileno()
    assert fd >= {fd_setsize}, f"the producer's socket is {{fd}}: the test proves nothing"
    app.worker(burst=True).run()  # a thread-pool worker, in this process
    assert handle.get(timeout=30) == 5

    # an idle worker waits on its sockets; a delayed task ends the wait on time
    worker = Worker(app, ["default"], concurrency=2)
    running = threading.Thread(target=worker.run)
    running.start()
    later = add.apply_in(0.3, 4, 5)
    assert later.get(timeout=30) == 9
    worker.stop()
    running.join(timeout=30)
    assert not running.is_alive()
    print("ok")
""")


def test_a_process_with_many_open_files_enqueues_runs_and_gets_results(kit: Kit,
                                                                       tmp_path: Path) -> None:
    env = {**os.environ, **kit.env(), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER.format(held=HELD, fd_setsize=FD_SETSIZE)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_holding_many_open_files_runs_tasks(kit: Kit, pool: str) -> None:
    log = kit.logs / f"worker-{len(kit.workers)}.log"
    worker = kit.processes.worker("tests.apps.many_files", "--pool", pool, "-c", "2",
                                  env={**kit.env(), "TEST_HOLD_FILES": str(HELD)}, log=log)
    kit.workers.append(worker)

    first = kit.tasks.record.delay("first")
    assert first.get(timeout=DEADLINE) == "first"
    delayed = kit.tasks.record.apply_in(0.3, "delayed")
    others = [kit.tasks.record.delay(f"other-{i}") for i in range(6)]
    assert delayed.get(timeout=DEADLINE) == "delayed"
    assert [o.get(timeout=DEADLINE) for o in others] == [f"other-{i}" for i in range(6)]

    assert worker.poll() is None, "the worker lives on"
    pids = [worker.pid] + (descendants(worker.pid) if pool == "process" else [])
    assert all(pid_running(pid) and high_sockets(pid) for pid in pids), \
        "every process of the worker talks to Redis on descriptors above 1024"
    kit.wait_until_drained()
    kit.assert_nothing_left()
