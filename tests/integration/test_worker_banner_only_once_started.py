"""``minitask worker`` announces itself (its INFO banner: app, broker, queues, pool) only
once its start steps passed: a start that fails (Redis unreachable, here) printed the
banner first, as if the worker were serving, then the error (probe35, LOW). A worker
that starts still prints it."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: What the banner says, and no other line.
BANNER = "app 'basic', broker"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_that_cannot_start_prints_no_banner(
        processes: Processes, tmp_path: Path, pool: str) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.basic", "--pool", pool, "-c", "1",
                              env={"MINITASK_BROKER_URL": "redis://127.0.0.1:1/0"}, log=log)
    assert exit_code(worker) == 3, log.read_text()
    said = log.read_text()
    assert "cannot start" in said and "minitask: error:" in said, said
    assert BANNER not in said and "INFO" not in said, said


def test_a_worker_that_starts_prints_its_banner(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.basic", "--pool", "thread", "-c", "1",
                     env={"MINITASK_BROKER_URL": start_redis().url}, log=log)
    wait_until(lambda: BANNER in log.read_text(), timeout=60, message="the banner")
    assert "ERROR" not in log.read_text(), log.read_text()
