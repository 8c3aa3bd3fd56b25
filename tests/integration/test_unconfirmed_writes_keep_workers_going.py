"""A write Redis made but replicas did not confirm in time (durability="replicated",
the replica stopped with SIGSTOP) is still acted on by the worker (probe29h H1, H2).

H1: the last member of a chord joins its group while the replica is stopped. The
join's reply says the group is complete (or failing), and the worker sent the body
(or failed it) only when it read that reply: the DurabilityError threw it away, the
members' acks went through, and the body was never sent, nor failed, for good.

H2: a worker whose queues include a scheduled one fires a tick while the replica is
stopped: the fire's DurabilityError reached its fetch loop, which backed off
fetching ALL its queues ("Redis refused to fetch tasks") until the replica came back.

Real worker processes of tests/apps/unconfirmed.py on a primary and its replica.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from minitask import chord
from tests.support.processes import Processes
from tests.support.replicas import frozen, pair_per_test  # noqa: F401 (a fixture)
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.unconfirmed import (DEADLINE, STALL, plain_outcomes, producer,
                                       unconfirmed_worker)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.mark.parametrize("failing", [False, True], ids=["complete", "failing"])
def test_a_chord_body_is_sent_when_the_last_join_is_unconfirmed(
        failing: bool, pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log = tmp_path / "worker.log"
    try:
        process = unconfirmed_worker(processes, primary, log)
        warm = app.tasks["total"].delay([1])  # the worker is up, serving
        assert warm.get(timeout=DEADLINE) == 1
        members = [app.tasks["member"].s(n, fail=failing and n == 2) for n in range(3)]
        handle = chord(members, app.tasks["total"].s()).delay()  # confirmed: replica up
        with frozen(replica, STALL):
            # the members end (1 s each) and join their group with the replica stopped
            wait_until(lambda: handle.status() not in ("pending", "unknown"),
                       timeout=DEADLINE, message="the chord's body to be sent or failed")
            if failing:
                assert handle.status() in ("failed", "cancelled"), handle.status()
            else:
                assert handle.get(timeout=DEADLINE) == 3
        stop_worker(process, log)
        text = log.read_text(errors="replace")
        assert "replicas did not confirm" in text, text  # the shortfall is said
    finally:
        app.close()


def test_an_unconfirmed_fire_holds_no_fetch_of_the_workers_queues(
        pair: List[RedisServer], processes: Processes, tmp_path: Path) -> None:
    primary, replica = pair
    app = producer(primary)
    log = tmp_path / "worker.log"
    try:
        process = unconfirmed_worker(processes, primary, log, "ticking", "plain")
        assert app.tasks["plain"].delay(0).get(timeout=DEADLINE) == 0  # up, serving
        with frozen(replica, STALL):
            # a tick (every second) fires, unconfirmed; then the worker must serve on
            # (said before the fix too, as a refused fetch; a late ack's is no fire's)
            wait_until(lambda: "the write to fire schedule(s)" in log.read_text(errors="replace"),
                       timeout=DEADLINE, message="an unconfirmed fire")
            handles = plain_outcomes(app, 3)
            wait_until(lambda: all(h.status() == "succeeded" for h in handles),
                       timeout=DEADLINE, message="the plain tasks to run, replica stopped")
        stop_worker(process, log)
        text = log.read_text(errors="replace")
        assert "refused to fetch" not in text, text
        assert "the fires of schedule(s)" in text, text
    finally:
        app.close()
