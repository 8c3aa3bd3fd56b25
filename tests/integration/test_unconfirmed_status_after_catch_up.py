"""``minitask status`` stops counting unconfirmed outcome writes once the replica has
caught up, though the worker wrote nothing since (issue 29, LOW): its heartbeat asks
the replicas (a touch and a short WAIT) while an outage of unconfirmed writes goes on.

Before the fix the count (UNCONFIRMED) stayed until the worker's next confirmed write
or its stop: an idle worker whose replica came back was shown with writes a failover
could lose, which the replica held.

Real worker processes of tests/apps/unconfirmed.py on a primary and its replica.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import List

import pytest

from tests.support.processes import Processes
from tests.support.replicas import frozen, in_sync, pair_per_test  # noqa: F401 (a fixture)
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.unconfirmed import (DEADLINE, STALL, plain_worker, producer,
                                       ran_unconfirmed, unconfirmed)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Outcomes recorded while the replica is stopped.
OUTCOMES = 4
#: Longer than the app's durability_timeout (0.3 s), with room for a loaded machine.
SETTLE = 2.0
#: Heartbeats (2 s apart in tests.apps.unconfirmed's worker: the default) to wait for
#: the count to go: several, on a loaded machine.
BEATS = 30.0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_status_counts_no_unconfirmed_write_once_the_replica_caught_up(
        pool: str, pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log, cwd = tmp_path / "worker.log", processes.cwd
    try:
        worker = plain_worker(processes, primary, app, log, pool, 2)
        with frozen(replica, STALL):
            ran_unconfirmed(app, OUTCOMES)
            wait_until(lambda: (unconfirmed(primary, cwd) or [0])[0] >= 1, timeout=DEADLINE,
                       interval=0.5, message="status to count the unconfirmed outcomes")
            time.sleep(SETTLE)  # every WAIT of the outcomes over, none confirmed
        wait_until(lambda: in_sync(primary, replica), timeout=DEADLINE,
                   message="the replica to catch up")
        # the worker idle since: no write of it confirmed after the outage
        wait_until(lambda: unconfirmed(primary, cwd) == [0], timeout=BEATS, interval=0.5,
                   message="status to count no unconfirmed write once the replica has them")
        assert "replicas confirm this worker's writes again" in log.read_text(errors="replace")
        stop_worker(worker, log)
        assert "the worker stops with" not in log.read_text(errors="replace")
    finally:
        app.close()
