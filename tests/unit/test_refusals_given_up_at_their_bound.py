"""A write the ACL refuses is given up at its bound (``persist``'s ``refused_for``: the
worker's visibility_timeout), not a backoff pause later: the pauses double up to 5 s
with jitter, and the bound was checked only after the next pause, so a 3 s bound held
the task's slot for up to 8 s (a crash test's worker gave up after 6.4 s). The last try
now comes at the bound. On a fake clock: exact, whatever the machine's load."""
from __future__ import annotations

import random

import pytest

from minitask.errors import BrokerError
from minitask.worker import outages
from minitask.worker.outages import RefusedTooLong, persist
from tests.unit.test_refused_outcomes_given_up_exactly import Clock, refusal


@pytest.mark.parametrize("bound", [0.5, 3.0, 7.3, 30.0])
def test_a_refusal_is_given_up_one_try_after_its_bound(
        monkeypatch: pytest.MonkeyPatch, bound: float) -> None:
    clock = Clock()
    monkeypatch.setattr(outages, "time", clock)
    monkeypatch.setattr(random, "uniform", lambda low, high: high)  # the longest pauses
    tries = []

    def step() -> str:
        tries.append(clock.now)
        raise refusal()
    start = clock.now
    with pytest.raises(RefusedTooLong):
        persist(step, "record a result", refused_for=bound)
    assert tries[-1] - start == pytest.approx(bound)  # the last try: at the bound
    assert len(tries) >= 2


def test_an_outage_still_backs_off_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a refusal (Redis away): no bound, every pause whole (the cap is the
    outage's: 5 s)."""
    clock = Clock()
    monkeypatch.setattr(outages, "time", clock)
    monkeypatch.setattr(random, "uniform", lambda low, high: high)
    tries = []

    def step() -> str:
        tries.append(clock.now)
        if len(tries) < 8:
            raise BrokerError("gone", reason="unreachable")
        return "written"
    assert persist(step, "record a result", refused_for=0.5) == "written"
    pauses = [round(later - earlier, 6) for earlier, later in zip(tries, tries[1:])]
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
