"""A worker starts, and serves, while its replica is stopped (durability="replicated",
probe29i H-A). Its start writes its app's schedules and its broadcast subscriptions,
scripts replicas must confirm: the DurabilityError of the first ("did not confirm the
write to save schedule ...", "... to subscribe ...") stopped the worker with exit
code 3, for any -Q once the app has one @app.periodic, though Redis made the write. A
deploy or a crash-restart while a replica was down or behind lost every queue.

Real worker processes on a primary and its replica stopped with SIGSTOP.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.replicas import frozen, pair_per_test  # noqa: F401 (a fixture)
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.unconfirmed import DEADLINE, STALL
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: The warning a start with unconfirmed writes logs, once.
STARTS = "the worker starts all the same"


@pytest.mark.parametrize("module, queues, write", [
    ("tests.apps.unconfirmed", "plain", "save schedule"),            # a queue with no schedule
    ("tests.apps.unconfirmed", "ticking,plain", "save schedule"),
    ("tests.apps.unconfirmed_broadcast", "plain,tidings", "subscribe"),
], ids=["periodic-app", "scheduled-queue", "broadcast-queue"])
@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_worker_starts_and_serves_while_the_replica_is_stopped(
        module: str, queues: str, write: str, pool: str, pair: List[RedisServer],
        processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    name = module.rsplit(".", 1)[1].replace("unconfirmed_broadcast", "unconfirmed_bc")
    app = Minitask(name, broker=primary.url, result_ttl=600)  # the worker's app, unconfirmed
    plain = app.task(name="plain", queue="plain")(lambda n: n)
    log = tmp_path / "worker.log"
    try:
        with frozen(replica, STALL):
            process = processes.worker(module, "--pool", pool, "-c", "2", "-Q", queues,
                                       env={"MINITASK_BROKER_URL": primary.url}, log=log)
            handle = plain.delay(7)  # no durability: the producer does not wait
            wait_until(lambda: handle.status() == "succeeded" or process.poll() is not None,
                       timeout=DEADLINE, message="the task to run, or the worker to exit")
            assert process.poll() is None, log.read_text(errors="replace")
            assert handle.get(timeout=DEADLINE) == 7
        stop_worker(process, log)
        text = log.read_text(errors="replace")
        assert text.count(STARTS) == 1, text  # the shortfall said once, a warning
        line = next(line for line in text.splitlines() if STARTS in line)
        assert "WARNING" in line and f"the write to {write}" in line, line
    finally:
        app.close()
