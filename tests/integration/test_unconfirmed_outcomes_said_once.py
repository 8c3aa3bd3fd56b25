"""With ``durability="replicated"`` and the replica stopped, a worker says once that
its outcome writes go unconfirmed, then counts them, and ``minitask status`` shows
it from the worker's heartbeat (issue 29, probe29i's last LOW).

It logged one ERROR per outcome (a flood for a busy worker) while ``minitask status``
said nothing. Now: one ERROR at the first, the others counted (a WARNING at most once
a minute while it lasts), a WARNING summing the outage up at the first write replicas
confirm again; the heartbeat's ``unconfirmed`` count, shown by ``minitask status``
(``UNCONFIRMED``), back to 0 then.

Real worker processes of tests/apps/unconfirmed.py on a primary and its replica.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from tests.support.processes import Processes
from tests.support.replicas import frozen, pair_per_test  # noqa: F401 (a fixture)
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.unconfirmed import (DEADLINE, FIRST, STALL, plain_worker, producer,
                                       ran_unconfirmed, status, unconfirmed)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Outcomes recorded while the replica is stopped.
OUTCOMES = 6
#: The worker's slots (``-c``): its threads, or its process pool's children. Children
#: count without a lock, so two whose writes time out together may both say an
#: outage's first (durability.rst): at most once each.
SLOTS = 2


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_unconfirmed_outcomes_are_said_once_and_shown_by_status(
        pool: str, pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log, cwd = tmp_path / "worker.log", processes.cwd
    try:
        worker = plain_worker(processes, primary, app, log, pool, SLOTS)
        with frozen(replica, STALL):
            ran_unconfirmed(app, OUTCOMES)
            # (the warm-up's outcome too, at times: its WAIT still ran as the replica
            # stopped; outcomes recorded together are one write)
            wait_until(lambda: (unconfirmed(primary, cwd) or [0])[0] >= OUTCOMES / 2,
                       timeout=DEADLINE, interval=0.5,
                       message="the heartbeat to count the unconfirmed outcomes")
            shown = status(primary, cwd)
            assert "UNCONFIRMED: " in shown and " outcome write(s) not confirmed" in shown, shown
            text = log.read_text(errors="replace")
            # said once, not once an outcome (of the OUTCOMES / 2 > SLOTS counted)
            if pool == "thread":
                assert text.count(FIRST) == 1, text
            else:  # (Redis times out WAITs of one moment together: children wake at once)
                assert 1 <= text.count(FIRST) <= SLOTS, text
        # the replica back: the next outcome is confirmed, and ends the outage
        # (once the replica has caught up: until then, outcomes go unconfirmed still)
        wait_until(lambda: app.tasks["plain"].apply_async((99,), durability=None).get(
            timeout=DEADLINE) == 99 and "replicas confirm this worker's writes again"
            in log.read_text(errors="replace"), timeout=DEADLINE, interval=0.5,
            message="the outage's summary")
        assert "outcome write(s) were left unconfirmed" in log.read_text(errors="replace")
        wait_until(lambda: unconfirmed(primary, cwd) == [0], timeout=DEADLINE,
                   message="the heartbeat to count none unconfirmed")
        stop_worker(worker, log)  # (a replica catching up may start a new outage: said)
    finally:
        app.close()
