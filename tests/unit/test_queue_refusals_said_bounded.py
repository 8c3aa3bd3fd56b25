"""A queue whose fetch Redis refuses for its data is set aside with a backoff of its
own, capped, said once and again at most every SAY_AGAIN_AFTER seconds with the
refusals since, and said served again once; an outage is no refusal of a queue."""
from __future__ import annotations

import logging
from typing import List

import pytest

from minitask.errors import BrokerError
from minitask.worker import outages
from minitask.worker.outages import MAX_ASIDE, SAY_AGAIN_AFTER, QueueRefusals

KEY = "minitask:{app:stuck}:leases"
REFUSED = BrokerError(f"could not fetch from queue 'stuck': WRONGTYPE minitask key {KEY} "
                      "holds another type", reason="script")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    ticking = Clock()
    monkeypatch.setattr(outages.time, "monotonic", ticking)
    return ticking


def said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == outages.logger.name]


def test_a_refused_queue_is_said_once_a_minute_and_served_again_once(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=outages.logger.name)
    refusals = QueueRefusals()
    assert not refusals and not refusals.aside("stuck")
    refusals.refused("stuck", REFUSED)
    assert refusals and refusals.known("stuck") and refusals.aside("stuck")
    assert not refusals.known("busy") and not refusals.aside("busy")
    for _ in range(500):  # a refusal per backoff, for a while: never more than the cap
        assert refusals.aside("stuck")
        clock.now += MAX_ASIDE
        assert not refusals.aside("stuck"), "tried again within the cap"
        refusals.refused("stuck", REFUSED)
    lines = said(caplog)
    assert len(lines) <= 1 + 500 * MAX_ASIDE / SAY_AGAIN_AFTER + 1, lines
    assert "'stuck'" in lines[0] and KEY in lines[0] and "set aside" in lines[0]
    assert all(record.levelname == "WARNING" for record in caplog.records)
    assert "refused" in lines[1] and "since the last warning" in lines[1], lines[1]
    assert not any("is back" in line for line in lines)

    caplog.clear()
    clock.now += MAX_ASIDE
    refusals.served("stuck", clock.now)
    refusals.served("stuck", clock.now)
    refusals.served("busy", clock.now)
    lines = said(caplog)
    assert len(lines) == 1 and "'stuck' served again" in lines[0] and "501" in lines[0]
    assert not refusals and not refusals.aside("stuck")


def test_only_a_refusal_of_the_queues_data_sets_a_queue_aside() -> None:
    assert QueueRefusals.refusal(REFUSED)
    assert QueueRefusals.refusal(BrokerError("WRONGTYPE", reason="wrong type"))
    for reason in ("unreachable", "out of memory", "read-only", "permission", "error"):
        assert not QueueRefusals.refusal(BrokerError("no", reason=reason)), reason
    assert not QueueRefusals.refusal(ValueError("script"))
