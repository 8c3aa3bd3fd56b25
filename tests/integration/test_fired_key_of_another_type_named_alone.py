"""A schedule held back by its queue's ``fired`` key of another type is said of that
key alone (issue 29, probe29p LOW): the worker logged "ignored data ... in key
...:schedules: key ...:fired holds another type", naming the schedules key first,
which holds nothing wrong. A real worker process of tests/apps/periodic.py on the
suite's redis-server; the log is read."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0


def test_a_fired_key_of_another_type_is_named_alone(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    keys = queue_keys("periodic", "default")
    admin.rpush(keys.fired, "someone's")
    log = tmp_path / "worker.log"
    worker = processes.worker(
        "tests.apps.periodic", env={"MINITASK_BROKER_URL": redis_server.url,
                                    "TEST_PERIODIC": json.dumps([{"name": "often",
                                                                  "task": "beat",
                                                                  "every": 1.0}])},
        log=log)
    try:
        deadline = time.monotonic() + DEADLINE
        while "ignored data minitask did not write" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
    finally:
        stop_worker(worker, log)
    text = log.read_text(errors="replace")
    line = next(line for line in text.splitlines()
                if "ignored data minitask did not write" in line)
    # moved aside whole since probe29r L4 (it held back every schedule of the queue)
    assert re.search(rf"in key {re.escape(keys.fired)}: it held another type than the hash "
                     rf"minitask keeps there: moved aside to {re.escape(keys.fired)}:foreign",
                     line), line
    assert keys.schedules not in line, line
    assert admin.lrange(keys.fired + ":foreign", 0, -1) == [b"someone's"]  # kept whole
