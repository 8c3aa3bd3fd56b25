"""The flow spec of a task holding a ``group_max_running`` (fair queue) or
``max_running`` slot lost while it runs (probe33 F3, issue 29 §1): the flow hash
deleted, of another type (moved aside by the next send), the holder's field deleted,
overwritten with junk or with the spec of another group or limiter. The holder's
outcome reads its spec to free its slot and re-arm what waits for it (flow.lua's
flow_end): with none, it freed nothing, and the next task of its group (or limiter),
sent meanwhile, met the full slot set, left the rotation to wait for that outcome, and
stayed queued for good, across worker restarts (status counted it ready). Now a full
set's holder whose spec does not say its outcome frees the slot holds none: its slot
is freed (said in Redis's log) and the waiting task runs; and a task that waited
already when the spec was lost runs once a worker starts (the start makes due each
limiter and group waiting with no due time).

Real worker processes on a real redis-server of the test's own. Each holder is kept
running (tests/apps/lost_slots.py: it waits for ``slots:go``) until the next task has
started, so the plant lands while the slot is held, whatever the machine's speed: on
the unfixed tree that start never came (the wait fails at its deadline).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
import redis

from minitask.admin.queues import queue_counts
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.held_slots import KEYS, LIMITER, LOST, PARK, Held, Plant, held_for, spec_set
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Bound on each wait (s), on a loaded machine.
DEADLINE = 60.0


def _flow_of_another_type(client: "redis.Redis[bytes]", holder: str) -> None:
    client.delete(KEYS.flow)
    client.set(KEYS.flow, "someone else's")  # the next send moves it aside


#: What happens to the holder's spec while it runs.
PLANTS: Dict[str, Plant] = {
    **LOST,
    "flow of another type": _flow_of_another_type,
    "its spec junk": spec_set("junk"),
    "its spec of another group or limiter": spec_set(
        "9:some.task\n0\n0\n1\n0\n0\n1\n0\n0\nOther"),
}


class Holders(Held):
    """Tasks of either kind sent, and their starts awaited."""

    def send(self, kind: str, tag: str) -> Any:
        return self.limited.delay(tag) if kind == "limited" else self.grouped.delay("A", tag)

    def started(self, *tags: str) -> None:
        wanted = {f"start:{tag}" for tag in tags}
        wait_until(lambda: wanted <= set(self.log()), timeout=DEADLINE,
                   message=f"{', '.join(tags)} to start")


@pytest.fixture
def held(logged_server: RedisServer, processes: Processes, tmp_path: Path,
         request: pytest.FixtureRequest) -> Iterator[Holders]:
    yield from held_for(Holders(logged_server, processes, tmp_path), request)


def _waiting_for_its_slot(held: Holders, kind: str) -> None:
    """Wait until the tasks sent after the holder wait for its slot: parked by their
    limiter, or their group out of the rotation (no token)."""
    if kind == "limited":
        wait_until(lambda: held.client.llen(PARK) >= 1
                   and held.client.zscore(KEYS.flow_due, LIMITER) is None,
                   timeout=DEADLINE, message="the next task to wait for the slot")
    else:
        turn = KEYS.fair_group("A", "turn")
        wait_until(lambda: held.client.zcard(KEYS.fair_group("A", "ready")) >= 1
                   and held.client.hget(turn, "tok") is None, timeout=DEADLINE,
                   message="the group to leave the rotation for the slot")


def _nothing_ready_nor_left(held: Holders) -> None:
    """The counts true: nothing ready (every task started), no group kept."""
    counts = queue_counts(held.app, "default")
    assert counts["ready"] == 0, counts
    assert not counts.get("grouped") and not counts.get("parked"), counts
    assert held.client.get(KEYS.groups_ready) in (None, b"0")
    assert not held.client.zcard(KEYS.groups)


# every plant on the thread pool for each kind; two more on the process pool
@pytest.mark.parametrize("kind, plant, pool",
                         [(kind, plant, "thread") for kind in ("grouped", "limited")
                          for plant in sorted(PLANTS)]
                         + [("grouped", "flow deleted", "process"),
                            ("limited", "its spec deleted", "process")])
def test_a_task_sent_after_its_slot_holders_spec_is_lost_runs(
        held: Holders, tmp_path: Path, kind: str, plant: str, pool: str) -> None:
    held.worker(pool)
    first = held.send(kind, "t0")
    held.started("t0")  # it holds the slot, until slots:go
    PLANTS[plant](held.client, first.id)
    second = held.send(kind, "t1")
    held.started("t1")  # before: it waited for t0's outcome, which re-armed nothing
    assert "end:t0" not in held.log()  # (t0 held the slot all along)
    _nothing_ready_nor_left(held)
    held.client.set("slots:go", "1")
    assert first.get(timeout=DEADLINE) == "t0"
    assert second.get(timeout=DEADLINE) == "t1"
    text = (tmp_path / "redis.log").read_text(errors="replace")
    assert "minitask: freed 1 slot(s) of " in text and first.id in text, text[-3000:]
    if plant == "flow of another type":
        assert held.client.get(KEYS.flow + ":foreign") == b"someone else's"
    # the slot goes on: two more tasks, one at a time
    held.client.delete("slots:go")
    later = [held.send(kind, "t2"), held.send(kind, "t3")]
    held.started("t2")
    _waiting_for_its_slot(held, kind)
    assert "start:t3" not in held.log()
    held.client.set("slots:go", "1")
    assert [handle.get(timeout=DEADLINE) for handle in later] == ["t2", "t3"]


def test_the_probes_case_the_groups_next_task_runs_and_is_counted_true(
        held: Holders) -> None:
    """probe33 F3 as found: three tasks of a group (``group_max_running=1``) sent, the
    first holding the slot, the other two waiting for it; the flow hash deleted; a
    fourth sent at once. The two whose specs went leave the group and run as ungrouped
    tasks (as before); the fourth stayed queued for good, its turn holding a gen alone,
    counted ready. Now it runs too, and the counts say nothing is ready."""
    held.worker("thread")
    handles = [held.send("grouped", f"t{n}") for n in range(3)]
    held.started("t0")
    _waiting_for_its_slot(held, "grouped")
    held.client.delete(KEYS.flow)
    handles.append(held.send("grouped", "t3"))
    held.started("t0", "t1", "t2", "t3")
    _nothing_ready_nor_left(held)
    held.client.set("slots:go", "1")
    assert [handle.get(timeout=DEADLINE) for handle in handles] == ["t0", "t1", "t2", "t3"]
    _nothing_ready_nor_left(held)
    assert not held.client.keys(KEYS.flow_prefix + "g:*")  # (its slot freed too)


# (the flow hash deleted whole, and the live worker's re-arm: in
# test_parked_tasks_run_after_holder_specs_lost.py)
@pytest.mark.parametrize("kind, plant", [("grouped", "its spec deleted"),
                                         ("grouped", "its spec junk"),
                                         ("limited", "its spec deleted")])
def test_a_task_waiting_when_its_slot_holders_spec_is_lost_runs_once_a_worker_starts(
        held: Holders, kind: str, plant: str) -> None:
    """The spec lost while the next task waits already (its group out of the rotation,
    or parked by its limiter, for the holder's outcome), and nothing sent after: that
    outcome re-arms nothing, and no fetch meets the full set. A worker's start makes
    due each limiter and group that waits with no due time, and the task runs."""
    first_worker = held.worker("thread")
    first, second = held.send(kind, "t0"), held.send(kind, "t1")
    held.started("t0")
    _waiting_for_its_slot(held, kind)
    PLANTS[plant](held.client, first.id)
    held.client.set("slots:go", "1")
    assert first.get(timeout=DEADLINE) == "t0"
    assert "start:t1" not in held.log()  # nothing re-armed it
    first_worker.terminate()
    first_worker.wait(timeout=DEADLINE)
    held.worker("thread")
    assert second.get(timeout=DEADLINE) == "t1"
    _nothing_ready_nor_left(held)
