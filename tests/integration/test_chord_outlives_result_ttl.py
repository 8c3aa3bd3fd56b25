"""A chord's body runs once every member has finished, however long the members
waited in the queue: its group's state (``group:<id>`` and its results) lives
``OPEN_GROUP_TTL_MS`` (30 days) from its creation or last join while the group is open,
and ``result_ttl`` once the body is sent or a member failed the group, so nothing is
kept for ever. Before, the state expired ``result_ttl`` after the chord was sent:
members queued longer than that found it gone and cancelled the body.

Real worker processes on the suite's redis-server, started only after the chord's
``result_ttl`` (a second, tests/apps/late_chord.py) has passed."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, List

import pytest

from minitask import TaskFailed, chord
from minitask.stores.workflow_links import OPEN_GROUP_TTL_MS
from tests.apps.late_chord import RESULT_TTL, build
from tests.support.processes import Processes
from tests.support.waiting import wait_until

#: How long a worker on a loaded machine may take to start and run a few tasks.
DEADLINE = 60.0
#: Members of each chord.
MEMBERS = 5


def group_keys(admin: Any) -> List[bytes]:
    return sorted(admin.keys("minitask:*:group:*"))


def outlive_result_ttl() -> None:
    """Wait, with no worker running, until every result_ttl sent so far has passed."""
    time.sleep(RESULT_TTL * 2.5)


@pytest.mark.integration
@pytest.mark.parametrize("member_task", ["late.member", "late.far_member"])
def test_a_chord_whose_members_wait_past_result_ttl_runs_its_body(
        member_task: str, redis_server: Any, admin: Any, processes: Processes,
        tmp_path: Path) -> None:
    # late.member: members and body in one queue (spawn_group.lua creates the group);
    # late.far_member: members in another queue (group_create.lua, a call of its own)
    app = build(redis_server.url)
    try:
        handle = chord([app.tasks[member_task].s(i) for i in range(MEMBERS)],
                       app.tasks["late.received"].s("late")).delay()
        outlive_result_ttl()
        # kept open: far longer than the result_ttl (OPEN_GROUP_TTL_MS), never for ever
        assert group_keys(admin)
        assert all(OPEN_GROUP_TTL_MS - 60_000 < admin.pttl(key) <= OPEN_GROUP_TTL_MS
                   for key in group_keys(admin))
        processes.worker("tests.apps.late_chord", "--pool", "thread", "-c", "2",
                         env={"MINITASK_BROKER_URL": redis_server.url},
                         log=tmp_path / "worker.log")
        assert handle.get(timeout=DEADLINE) == MEMBERS  # raised TaskFailed: group gone
        assert [json.loads(raw) for raw in admin.lrange("marks:received:late", 0, -1)] == [
            list(range(MEMBERS))]
        # bounded: the group's state expires result_ttl after the body was sent
        wait_until(lambda: not group_keys(admin), timeout=DEADLINE,
                   message="the completed chord's group state expired")
        assert admin.llen("marks:received:late") == 1
    finally:
        app.close()


@pytest.mark.integration
def test_a_failed_chord_that_waited_past_result_ttl_still_ends(
        redis_server: Any, admin: Any, processes: Processes, tmp_path: Path) -> None:
    app = build(redis_server.url)
    try:
        members = [app.tasks["late.member"].s(0), app.tasks["late.boom"].s(1)]
        handle = chord(members, app.tasks["late.received"].s("failed")).delay()
        outlive_result_ttl()
        processes.worker("tests.apps.late_chord", "--pool", "thread", "-c", "2",
                         env={"MINITASK_BROKER_URL": redis_server.url},
                         log=tmp_path / "worker.log")
        with pytest.raises(TaskFailed, match="boom 1"):
            handle.get(timeout=DEADLINE)
        assert handle.status() == "cancelled"
        wait_until(lambda: not group_keys(admin), timeout=DEADLINE,
                   message="the failed chord's group state expired")
        assert not admin.exists("marks:received:failed")
    finally:
        app.close()


@pytest.mark.integration
def test_a_chord_whose_members_are_all_cancelled_keeps_nothing(
        redis_server: Any, admin: Any) -> None:
    app = build(redis_server.url)
    try:
        members = [app.tasks["late.far_member"].s(i).set(task_id=f"m{i}") for i in range(3)]
        handle = chord(members, app.tasks["late.received"].s("cancelled")).delay()
        outlive_result_ttl()
        for i in range(3):
            assert app.handle(f"m{i}").cancel()
        with pytest.raises(TaskFailed, match="cancelled before it started"):
            handle.get(timeout=DEADLINE)
        wait_until(lambda: not group_keys(admin), timeout=DEADLINE,
                   message="the cancelled chord's group state expired")
    finally:
        app.close()
