"""A group_max_running=1 group on a real worker that fetches four tasks at a time: a
task sent while the group's first waits for its retry starts only after that retry
ended (the retry, promoted into the list behind the group's token, was popped with it
by one fetch and taken for gone: its slot freed, the next task started first)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from tests.apps import fair_sequential
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_task_sent_during_its_groups_retry_starts_after_it(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path, pool: str) -> None:
    app = Minitask("seq", broker=redis_server.client())
    for task in fair_sequential.app.tasks.values():
        options = task.options
        app.task(name=task.name, group_by=options.grouping.group_by,
                 group_max_running=options.grouping.max_running or None,
                 retries=options.retries, retry_backoff=options.retry_backoff,
                 retry_backoff_max=options.retry_backoff_max,
                 ignore_result=options.ignore_result)(task.func)
    ordered = app.tasks["tests.apps.fair_sequential.ordered"]
    slow = app.tasks["tests.apps.fair_sequential.slow"]
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.fair_sequential", "--pool", pool, "-c", "1",
                     "--prefetch", "4", "--loglevel", "WARNING",
                     env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        wait_until(lambda: admin.zcard(AppKeys("seq").workers) >= 1, timeout=DEADLINE,
                   message="the worker to start")

        def records() -> List[str]:
            return [raw.decode() for raw in admin.lrange("seq:log:G", 0, -1)]

        ordered.delay("G", 0)
        wait_until(lambda: "end:0:1:failed" in records(), timeout=DEADLINE,
                   message="G's task 0 to fail its first attempt")
        slow.delay(2.5)  # the slot busy past task 0's retry (1 s)
        ordered.delay("G", 1)  # sent while task 0 waits for its retry
        wait_until(lambda: sum(":ok" in r for r in records()) == 2, timeout=DEADLINE,
                   message="both of G's tasks to end")
        assert records() == ["start:0:1", "end:0:1:failed", "start:0:2", "end:0:2:ok",
                             "start:1:1", "end:1:1:ok"]
    except AssertionError:
        print(log.read_text(errors="replace")[-4000:])
        raise
    finally:
        processes.kill_all()
        app.close()
