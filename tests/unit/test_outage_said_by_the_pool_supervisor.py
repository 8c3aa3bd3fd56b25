"""A process pool's children ride an outage quietly: their supervisor says it once each
way for the worker, and tells them it rides one (memory they inherit). A child that
still cannot reach Redis while its supervisor can says so itself, once."""
from __future__ import annotations

import logging
from typing import Any, Iterator, List

import pytest

from minitask.errors import BrokerError
from minitask.worker import outages
from minitask.worker.outages import Backoff

LOST = BrokerError("could not wait: connection refused", reason="unreachable")


def lines(caplog: pytest.LogCaptureFixture, level: int) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and r.name == "minitask.worker.outages"]


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """This process as a process pool's supervisor (then, as the test says, its child)."""
    monkeypatch.setattr(outages, "_OUTAGE", outages._Outage())
    outages.share_outages()
    yield outages._OUTAGE.shared


def ride(step: Backoff, times: int = 2) -> None:
    for _ in range(times):
        step.failed(LOST)


def test_the_supervisor_says_it_and_tells_its_children(
        shared: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="minitask.worker.outages"):
        orders = Backoff("listen for orders")
        ride(orders)
        assert shared.value == 1
        orders.succeeded()
    assert shared.value == 0
    assert len(lines(caplog, logging.ERROR)) == 1 and len(lines(caplog, logging.WARNING)) == 1


def test_a_child_rides_it_quietly_while_its_supervisor_does(
        shared: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outages, "ALONE_AFTER", 0.0)
    shared.value = 1  # the supervisor rides the outage
    outages.ride_outages_quietly()
    assert outages._OUTAGE.shared is shared and outages._OUTAGE.quiet
    with caplog.at_level(logging.DEBUG, logger="minitask.worker.outages"):
        tasks, cancels = Backoff("wait for tasks"), Backoff("wait for cancel requests")
        ride(tasks, 5)
        ride(cancels, 5)
        tasks.succeeded()
        cancels.succeeded()
    assert lines(caplog, logging.ERROR) == [] and lines(caplog, logging.WARNING) == []
    assert shared.value == 1, "a child never writes the supervisor's state"


def test_a_child_alone_in_its_outage_says_so_once_each_way(
        shared: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    outages.ride_outages_quietly()
    with caplog.at_level(logging.DEBUG, logger="minitask.worker.outages"):
        tasks = Backoff("wait for tasks")
        ride(tasks, 3)  # not yet ALONE_AFTER: quiet
        assert lines(caplog, logging.ERROR) == []
        monkeypatch.setattr(outages, "ALONE_AFTER", 0.0)
        ride(tasks, 3)
        tasks.succeeded()
        # the next outage starts quiet again
        ride(tasks, 1)
        tasks.succeeded()
    errors = lines(caplog, logging.ERROR)
    assert len(errors) == 1 and "this child of the pool only" in errors[0]
    assert len(lines(caplog, logging.WARNING)) == 1
