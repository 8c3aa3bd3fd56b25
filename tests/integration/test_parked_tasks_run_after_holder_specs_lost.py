"""Tasks parked by a ``max_running`` limiter run when the flow specs of its slot holders
are lost while the holders run and the tasks wait (probe34 M1, M2; issue 29).

A parked task waits for a holder's outcome, which reads the holder's spec to free its
slot and make the limiter due (flow.lua's flow_end). With the spec lost (its field
deleted, junk, the spec of another limiter: M2) that outcome frees nothing, and the
parked tasks waited on a live worker until a restart or a new send. With the whole
flow hash lost (deleted, evicted: M1) they waited for good, across restarts too: a
fetch did no flow control with the hash empty, so a limiter made due was never read.

Now a fetch does flow control while a limiter has tasks parked, and a worker's
heartbeat makes due, every ``REARM_EVERY_MS``, each limiter with parked tasks and no
due time (flow_rearm.py): the fetch frees the slots whose holders' specs no longer
name the limiter (flow.lua's vacate) and the parked tasks run, on the live worker
within a bounded time, and after a restart. A parked task whose own spec was lost
runs without limits (a spec lost is no limit: docs/guide/flow-control.rst).

Real worker processes on a real redis-server of the test's own. The holder is kept
running (tests/apps/lost_slots.py: it waits for ``slots:go``) while the plant lands.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from minitask.stores.flow_rearm import REARM_EVERY_MS
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.held_slots import KEYS, LIMITER, LOST, PARK, Held, Plant, held_for, spec_set
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Bound on each wait (s), on a loaded machine: a re-arm period and a heartbeat, and room.
DEADLINE = REARM_EVERY_MS / 1000 + 50.0

#: What happens to the holder's spec (or the whole flow hash) while it runs.
PLANTS: Dict[str, Plant] = {
    **LOST,
    "its spec junk": spec_set(b"\xff\xfejunk"),
    "its spec of another limiter": spec_set("9:some.task\n0\n0\n1\n0\n0"),
}


class Parked(Held):
    """The limited task's holder and the tasks parked for its slot."""

    def parked_behind(self, holder: Any, waiting: int) -> None:
        """``holder`` started, and ``waiting`` tasks parked for its slot (no due time)."""
        wait_until(lambda: "start:t0" in self.log() and self.client.llen(PARK) == waiting
                   and self.client.zscore(KEYS.flow_due, LIMITER) is None,
                   timeout=DEADLINE, message=f"t0 to hold the slot, {waiting} parked")

    def holder_ended(self, holder: Any) -> None:
        self.client.set("slots:go", "1")
        assert holder.get(timeout=DEADLINE) == "t0"


@pytest.fixture
def held(logged_server: RedisServer, processes: Processes, tmp_path: Path,
         request: pytest.FixtureRequest) -> Iterator[Parked]:
    yield from held_for(Parked(logged_server, processes, tmp_path), request)


def _all_ran(held: Parked, handles: List[Any]) -> None:
    assert [handle.get(timeout=DEADLINE) for handle in handles] == [
        f"t{n}" for n in range(1, len(handles) + 1)]
    assert held.client.llen(PARK) == 0
    assert not held.client.exists(KEYS.flow_limiters)


@pytest.mark.parametrize("plant, pool", [(plant, "thread") for plant in sorted(PLANTS)]
                         + [("flow deleted", "process")])
def test_parked_tasks_run_on_the_live_worker(held: Parked, tmp_path: Path, plant: str,
                                             pool: str) -> None:
    held.worker(pool)
    first = held.limited.delay("t0")
    parked = [held.limited.delay(f"t{n}") for n in range(1, 4)]
    held.parked_behind(first, 3)
    PLANTS[plant](held.client, first.id)
    held.holder_ended(first)
    # before: nothing made the limiter due again, and they stayed parked for good
    _all_ran(held, parked)
    if plant != "flow deleted":  # (the whole hash lost: the parked run without limits)
        text = (tmp_path / "redis.log").read_text(errors="replace")
        assert "minitask: freed 1 slot(s) of " in text and first.id in text, text[-3000:]


def test_parked_tasks_run_after_a_restart_when_the_flow_hash_was_lost(held: Parked) -> None:
    """M1 as found: the whole flow hash deleted while the holder runs and three wait;
    the worker stopped as the holder ends, and another started. Before, a fetch did
    no flow control with the hash empty: the limiter made due at the start was never
    read, and the three stayed parked."""
    first_worker = held.worker("thread")
    first = held.limited.delay("t0")
    parked = [held.limited.delay(f"t{n}") for n in range(1, 4)]
    held.parked_behind(first, 3)
    PLANTS["flow deleted"](held.client, first.id)
    held.holder_ended(first)
    first_worker.terminate()
    first_worker.wait(timeout=DEADLINE)
    held.worker("thread")
    _all_ran(held, parked)


def test_a_limiter_of_live_holders_keeps_its_limit(held: Parked) -> None:
    """The re-arm frees no slot whose holder runs under its lease with its spec: the
    parked task waits through re-arm periods, and runs after the holder's outcome."""
    held.worker("thread")
    first = held.limited.delay("t0")
    second = held.limited.delay("t1")
    held.parked_behind(first, 1)
    # past a re-arm period and a heartbeat: the limiter was tried, and left again
    time.sleep(REARM_EVERY_MS / 1000 + 6.0)
    assert "start:t1" not in held.log()
    assert held.client.llen(PARK) == 1
    held.holder_ended(first)
    assert second.get(timeout=DEADLINE) == "t1"
