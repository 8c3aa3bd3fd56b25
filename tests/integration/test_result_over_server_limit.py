"""A result the Redis server cannot read (issue 29): with ``max_result_bytes`` far
over the server's ``proto-max-bulk-len``, a 30 MB result made Redis reset the
connection while the worker was still writing it; that looked like an outage, so
the outcome was written again for ever, the task stayed running and the tasks behind
it on ``-c 1`` never ran. Now the worker reads the server's limit as it starts and
caps results below it: the task is dead with ResultTooLarge, the worker goes on.
"""
from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

from minitask import TaskFailed
from tests.apps.big_results import producer
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Generous for a loaded 2-core machine; the task ends in well under a second.
DEADLINE = 20.0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_result_over_the_servers_bulk_limit_is_dead_and_the_worker_goes_on(
        pool: str, start_redis: Callable[..., Any], processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    env: Dict[str, str] = {"MINITASK_BROKER_URL": server.url}
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.big_results", "--pool", pool, "-c", "1",
                              env=env, log=log)
    big_app = producer(server.url)
    try:
        sized = big_app.tasks["bigres.sized"]
        large = sized.delay(30_000_000)
        small = sized.delay(3)
        with pytest.raises(TaskFailed) as failed:
            large.get(timeout=DEADLINE)
        assert failed.value.exc_type == "ResultTooLarge"
        message = failed.value.message
        assert "'bigres.sized'" in message  # the task
        assert re.search(r"result is 30,000,\d{3} bytes, over the 1,04\d,\d{3} bytes", message)
        assert "proto-max-bulk-len is 1,048,576" in message  # the server's limit
        assert small.get(timeout=DEADLINE) == "xxx"  # the task behind it ran
        wait_until(lambda: "proto-max-bulk-len (1,048,576)" in log.read_text(errors="replace"),
                   timeout=DEADLINE, message="the start-up line on the server's limit")
        assert worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        assert exit_code(worker) == 0
    finally:
        big_app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
