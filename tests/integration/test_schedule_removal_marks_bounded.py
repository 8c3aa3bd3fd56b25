"""The marks ``remove_schedule`` leaves (so that running workers do not write a removed
decorated schedule back) are bounded. Before, each removal wrote ``removed:<name>`` in
the ``fired`` hash of every queue of the app, and only a save of the same name cleared
it: schedules added and removed at run time under new names (one per report, per
tenant) grew every queue's hash for ever. Now a queue that held the schedule (or that
the remover's code decorates it on) keeps the mark in ``schedules_removed``, its newest
REMOVED_MOST marks only; the newest still keep a running worker from writing one back."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.stores import schedules as schedule_store

pytestmark = [pytest.mark.integration, pytest.mark.app("marks", on="server")]

MOST = 10


def _marks(admin: "redis.Redis[bytes]", queue: str) -> int:
    """Every removal mark Redis holds for the queue, in any key minitask has used."""
    keys = queue_keys("marks", queue)
    legacy = sum(1 for field in admin.hkeys(keys.fired) if field.startswith(b"removed:"))
    return legacy + int(admin.zcard(keys.schedules_removed))


def test_removals_under_new_names_leave_a_bounded_number_of_marks(
        app: Minitask, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_store, "REMOVED_MOST", MOST)
    app.task(name="t.report")(lambda n: n)
    app.task(name="t.other", queue="other")(lambda n: n)
    added = []
    for n in range(3 * MOST):
        added.append(app.add_schedule(f"report-{n}", "t.report", every=3600, args=(n,)))
        assert app.remove_schedule(f"report-{n}") is True
    assert _marks(admin, "default") == MOST
    assert _marks(admin, "other") == 0  # it never held them
    kept = admin.zrange(queue_keys("marks", "default").schedules_removed, 0, -1)
    assert kept == [f"report-{n}".encode() for n in range(2 * MOST, 3 * MOST)]
    store = app.broker.schedules
    newest = added[-1]
    # the newest marks still hold: a running worker's write-back is refused
    assert store.save(newest, newest.next_after(app.clock.now_ms()), missing=True) is False
    assert app.schedules() == []
    # a save of the name (a worker's start, add_schedule) clears its mark
    store.save(newest, newest.next_after(app.clock.now_ms()))
    assert _marks(admin, "default") == MOST - 1


def test_a_decorated_schedule_whose_record_is_gone_is_marked_on_its_queue(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.periodic(every=60, name="t.beat")
    def beat() -> None:
        pass

    schedule = app.periodic_schedules["t.beat"]
    assert app.remove_schedule("t.beat") is False  # its record was never written (lost)
    assert _marks(admin, "default") == 1
    store = app.broker.schedules
    assert store.save(schedule, schedule.next_after(app.clock.now_ms()), missing=True) is False
