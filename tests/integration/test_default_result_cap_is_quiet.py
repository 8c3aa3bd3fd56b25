"""A worker on a Redis whose ``proto-max-bulk-len`` is below the app's results limit
caps results under it (test_result_over_server_limit.py). It warned of that even when
the app never named ``max_result_bytes`` (issue 29, probe 15): the default, 1 MB on a
server of 1mb, read "max_result_bytes=1,048,576 is over what this Redis takes" at
WARNING, for a setting nobody made. Now the default is capped quietly (INFO); the
warning stays for an app that named ``max_result_bytes`` (that test's app).
"""
from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.apps.foreign import build
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Generous for a loaded 2-core machine: the task ends in milliseconds.
DEADLINE = 60.0


def test_the_default_results_limit_is_capped_below_the_server_without_a_warning(
        start_redis: Callable[..., Any], processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    app = build(server.url)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.foreign", "-c", "1", "-Q", "other",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    try:
        token = uuid.uuid4().hex
        app.tasks["mark"].delay(token)
        client = server.client()
        try:
            wait_until(lambda: token.encode() in client.lrange("marks:other", 0, -1),
                       timeout=DEADLINE, message="a task run: the worker has started")
        finally:
            client.close()
        lines = log.read_text(errors="replace").splitlines()
        capped = [line for line in lines if "proto-max-bulk-len (1,048,576)" in line]
        assert len(capped) == 1, lines
        assert " INFO " in capped[0] and "results are capped at 1,04" in capped[0]
        assert not [line for line in lines if " WARNING " in line], lines
        worker.send_signal(signal.SIGTERM)
        assert exit_code(worker) == 0
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
