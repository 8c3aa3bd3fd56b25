"""A durable worker (``durability="replicated"``) that stops after its replica caught
up does not warn that outcomes were left unconfirmed: they are on the replica by now
(the last session's open LOW). Its stop warning counts only writes replicas still
lack; one stopping while the replica is still down warns as before
(tests/integration/test_durability_waits.py keeps that).

Before the fix the outage ended only at the worker's next confirmed write, so an idle
worker whose replica came back said at its stop "the worker stops with N outcome
write(s) left unconfirmed by replicas".

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
from tests.support.unconfirmed import (DEADLINE, FIRST, STALL, plain_worker, producer,
                                       ran_unconfirmed)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Outcomes recorded while the replica is stopped.
OUTCOMES = 4
#: Longer than the app's durability_timeout (0.3 s), with room for a loaded machine.
SETTLE = 2.0
STOP_WARNING = "the worker stops with"
ENDED = "replicas confirm this worker's writes again"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_stopping_after_its_replica_caught_up_warns_of_nothing_unconfirmed(
        pool: str, pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log = tmp_path / "worker.log"
    try:
        worker = plain_worker(processes, primary, app, log, pool, 2)
        with frozen(replica, STALL):
            ran_unconfirmed(app, OUTCOMES)
            wait_until(lambda: FIRST in log.read_text(errors="replace"), timeout=DEADLINE,
                       message="their outcomes unconfirmed")
            # a result is read on the primary before its WAIT runs out: every WAIT of
            # durability_timeout (0.3 s) over before the replica wakes, none confirmed
            time.sleep(SETTLE)
        wait_until(lambda: in_sync(primary, replica), timeout=DEADLINE,
                   message="the replica to catch up")
        stop_worker(worker, log)  # idle since: no write of it was confirmed after the outage
        text = log.read_text(errors="replace")
        assert STOP_WARNING not in text, text
        assert ENDED in text, text
    finally:
        app.close()
