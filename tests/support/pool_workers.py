"""What the tests of one app's tasks on every pool share (tests/crash/
test_a_forking_task_on_every_pool.py, test_escapes_from_the_loop_on_every_pool.py): the
test's side of a tests.apps module's app, and worker processes of that module on the
test's own redis-server."""
from __future__ import annotations

import importlib
import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from minitask import Minitask
from tests.support.processes import Processes, exit_code, send
from tests.support.procfs import group_members
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until


@contextmanager
def producer_of(module: str, server: RedisServer) -> Iterator[Minitask]:
    """An app named as ``module``'s (so its keys) on ``server``, with its tasks and their
    retries (the module's own app takes its broker from MINITASK_BROKER_URL, for the
    workers); closed on exit."""
    found: Minitask = importlib.import_module(module).app
    app = Minitask(found.name, broker=server.client())
    for task in found.tasks.values():
        app.task(name=task.name, retries=task.options.retries)(task.func)
    try:
        yield app
    finally:
        app.close()


def producer_fixture(module: str) -> Any:
    """A ``producer`` fixture of ``module`` (producer_of() on the test's ``server``): a
    test module takes it as ``producer = producer_fixture(APP)``."""
    @pytest.fixture(name="producer")
    def made(server: RedisServer) -> Iterator[Minitask]:
        with producer_of(module, server) as app:
            yield app

    return made


def pool_worker(processes: Processes, module: str, server: RedisServer, pool: str,
                concurrency: int, log: Path, *args: str) -> "subprocess.Popen[bytes]":
    """A worker process of ``module`` on ``server``: ``pool``, ``concurrency`` at once,
    ``args`` more options; its output in ``log``."""
    return processes.worker(module, "--pool", pool, "-c", str(concurrency), *args,
                            env={"MINITASK_BROKER_URL": server.url}, log=log)


def stops_cleanly(worker: "subprocess.Popen[bytes]", log: Path, stops_within: float,
                  deadline: float) -> None:
    """SIGTERM ``worker``: it exits 0 within ``stops_within`` seconds (its ``log`` shown
    if not), and every process of its group (a copy a task or hook forked, say) ends
    within ``deadline``."""
    send(worker, signal.SIGTERM)
    assert exit_code(worker, timeout=stops_within) == 0, log.read_text()
    wait_until(lambda: not group_members(worker.pid), timeout=deadline,
               message=f"the worker's processes to end: {group_members(worker.pid)}")


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left of a worker's process group, whatever the test came to."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
