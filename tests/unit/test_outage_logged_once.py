"""One Redis outage is one ERROR when it starts and one WARNING when it ends, however
many of the worker's threads (fetch, heartbeat, cancel watch, orders) ride it out."""
from __future__ import annotations

import logging
from typing import List

import pytest

from minitask.errors import BrokerError
from minitask.worker.outages import Backoff


def lines(caplog: pytest.LogCaptureFixture, level: int) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and r.name == "minitask.worker.outages"]


def test_three_threads_losing_redis_log_it_once_each_way(
        caplog: pytest.LogCaptureFixture) -> None:
    lost = BrokerError("could not fetch: connection refused", reason="unreachable")
    steps = [Backoff("wait for tasks"), Backoff("renew leases"), Backoff("listen for orders")]
    with caplog.at_level(logging.DEBUG, logger="minitask.worker.outages"):
        for step in steps:
            step.failed(lost)
            step.failed(lost)
        steps[0].succeeded()
        steps[1].gave_up()  # its worker stopped while Redis was away
        assert lines(caplog, logging.WARNING) == []  # one step still waits
        steps[2].succeeded()
    errors, warnings = lines(caplog, logging.ERROR), lines(caplog, logging.WARNING)
    assert len(errors) == 1 and "lost Redis while trying to wait for tasks" in errors[0]
    assert len(warnings) == 1 and warnings[0].startswith("Redis is back after ")


def test_the_next_outage_is_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    lost = BrokerError("could not fetch: connection refused", reason="unreachable")
    step = Backoff("wait for tasks")
    with caplog.at_level(logging.INFO, logger="minitask.worker.outages"):
        for _ in range(2):
            step.failed(lost)
            step.succeeded()
    assert len(lines(caplog, logging.ERROR)) == 2 and len(lines(caplog, logging.WARNING)) == 2


def test_a_refusal_is_not_an_outage_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    refused = BrokerError("NOPERM", reason="permission")
    step = Backoff("wait for tasks")
    with caplog.at_level(logging.INFO, logger="minitask.worker.outages"):
        step.failed(refused)
        step.succeeded()
    assert lines(caplog, logging.ERROR) == [
        "Redis refused to wait for tasks: NOPERM; retrying with backoff"]
