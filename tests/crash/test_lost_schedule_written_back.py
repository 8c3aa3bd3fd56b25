"""A decorated schedule whose record Redis loses under a running worker fires again.

A thread worker of ``tests.apps.periodic`` decorates ``tick`` (every 0.5 s). Its
queue's ``schedules`` key deleted, or the server killed (SIGKILL, no persistence) and
started again empty on the same port: the worker writes the schedule back from its
code, and ticks resume within seconds, with no restart. Each tick still runs once.
``remove_schedule`` of it, on the other hand, holds while the worker runs
(docs/guide/periodic.rst).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest

from minitask.broker.keys import queue_keys
from tests.support.lost_schedules import lose_and_resume, start_worker, stopped, ticks
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash


def _delete_schedules(server: RedisServer) -> None:
    client = server.client()
    try:
        client.delete(queue_keys("periodic", "default").schedules)
    finally:
        client.close()


def _restart_empty(server: RedisServer) -> None:
    server.stop()  # SIGKILL, no persistence: started again empty, on the same port
    server.start()


def test_schedules_key_deleted(start_redis: Callable[..., RedisServer], processes: Processes,
                               tmp_path: Path) -> None:
    lose_and_resume(start_redis, processes, tmp_path / "worker.log", _delete_schedules)


def test_server_restarted_empty(start_redis: Callable[..., RedisServer], processes: Processes,
                                tmp_path: Path) -> None:
    lose_and_resume(start_redis, processes, tmp_path / "worker.log", _restart_empty)


def test_removed_schedule_stays_removed(start_redis: Callable[..., RedisServer],
                                        processes: Processes, tmp_path: Path) -> None:
    from minitask import Minitask
    server, log = start_redis(), tmp_path / "worker.log"
    start_worker(server, processes, log)
    app = Minitask("periodic", broker=server.client())
    try:
        assert app.remove_schedule("tick") is True
        removed = time.time()
        time.sleep(3.0)  # six periods, and reads of the worker woken by the removal
        assert ticks(server, removed + 0.5) == []  # (a run fired just before may end)
        assert app.schedules() == []
    finally:
        app.close()
    stopped(processes)
