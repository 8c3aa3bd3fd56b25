"""The process pool's replacements of children that die as they start
(``worker.pools.starts.Respawns``), on a clock the test moves: the first death at
start is replaced at once, each further one in a row after a delay that doubles up
to the cap; a child that served (or lived past the start window) ends the row."""
from __future__ import annotations

from typing import List

import pytest

from minitask.worker.pools import starts
from minitask.worker.pools.starts import MAX_DELAY, START_WINDOW, Respawns


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    clock = [1000.0]
    monkeypatch.setattr(starts.time, "monotonic", lambda: clock[0])
    return clock


def die_at_start(respawns: Respawns, now: List[float], pid: int) -> float:
    """Child ``pid`` starts and dies at once: the delay its replacement waits."""
    respawns.started(pid)
    now[0] += 0.01
    assert respawns.ended(pid, served=False)
    respawns.exited(pid, 1)
    respawns.owe()
    delay = respawns.delay()
    assert respawns.due() == (1 if delay == 0 else 0)
    now[0] += delay
    if delay:
        assert respawns.due() == 1
    return delay


def test_delays_grow_from_nothing_to_the_cap(now: List[float]) -> None:
    respawns = Respawns()
    delays = [die_at_start(respawns, now, pid) for pid in range(1, 12)]
    assert delays[:4] == [0.0, 0.1, 0.2, 0.4]
    assert delays == sorted(delays) and delays[-1] == MAX_DELAY
    assert not respawns.owed


def test_a_child_that_serves_ends_the_row(now: List[float]) -> None:
    respawns = Respawns()
    for pid in range(1, 5):
        die_at_start(respawns, now, pid)
    respawns.started(99)
    now[0] += START_WINDOW
    assert respawns.due() == 0 and respawns.row == 0  # said: children start again
    assert die_at_start(respawns, now, 100) == 0.0  # a new row: replaced at once


def test_deaths_that_are_not_at_start_make_no_row(now: List[float]) -> None:
    respawns = Respawns()
    for pid in range(1, 20):
        respawns.started(pid)
        now[0] += 0.01
        assert not respawns.ended(pid, served=True)  # it ran a task, or we killed it
        respawns.owe()
        assert respawns.delay() == 0.0 and respawns.due() == 1
    respawns.started(50)
    now[0] += START_WINDOW  # an idle child that lived past the window started
    assert not respawns.ended(50, served=False)


def test_a_row_long_over_starts_afresh(now: List[float]) -> None:
    respawns = Respawns()
    for pid in range(1, 5):
        die_at_start(respawns, now, pid)
    now[0] += 3600  # an hour later, a single child dies as it starts
    assert die_at_start(respawns, now, 7) == 0.0
