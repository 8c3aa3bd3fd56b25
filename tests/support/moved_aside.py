"""A redis-server logging to a file and a worker process serving one of the apps of
tests/apps/*_aside.py: the tests of queue keys of another type that a send moves aside
(``<key>:foreign``, said in Redis's log) read that log and watch the worker go on."""
from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Callable, Iterator, Tuple

import pytest
import redis

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer

#: Bound on the worker's stop (s), on a loaded machine.
STOP_DEADLINE = 30.0


@contextlib.contextmanager
def served_aside(processes: Processes, tmp_path: Path, request: pytest.FixtureRequest,
                 app: str, queues: str, producer: Callable[["redis.Redis[bytes]"], Minitask]
                 ) -> Iterator[Tuple[Minitask, Path]]:
    """A redis-server of its own logging to a file, a worker process of module ``app``
    (two threads) serving ``queues``; yields the app ``producer`` makes and the path of
    Redis's log. After, the worker still runs and stops cleanly on SIGTERM (its log
    printed if the test failed)."""
    server_log = tmp_path / "redis.log"
    server = RedisServer(0, tmp_path / "redis", extra=["--logfile", str(server_log)])
    server.start()
    worker_log = tmp_path / "worker.log"
    worker = processes.worker(app, "--pool", "thread", "-c", "2", "-Q", queues,
                              env={"MINITASK_BROKER_URL": server.url}, log=worker_log)
    producing = producer(server.client())
    try:
        yield producing, server_log
        assert worker.poll() is None, worker_log.read_text(errors="replace")[-3000:]
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=STOP_DEADLINE) == 0
    finally:
        producing.close()
        if did_fail(request):
            print(worker_log.read_text(errors="replace")[-6000:])
        server.stop()
