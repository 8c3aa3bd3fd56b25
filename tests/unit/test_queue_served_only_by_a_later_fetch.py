"""A fetch sent before its queue was set aside proves nothing of the queue's keys
(crash test of a refused queue, thread pool at -c 2, this session): one thread's wait
was refused and set the queue aside, and another thread's fetch, in flight since
before, came back empty and said "served again ... its keys were fixed" 4 ms later;
the next fetch was refused again, one warning more than the operator should read."""
from __future__ import annotations

import logging

import pytest

from minitask.errors import BrokerError
from minitask.worker import outages
from minitask.worker.outages import QueueRefusals

REFUSED = BrokerError("could not fetch from queue 'stuck': WRONGTYPE minitask key "
                      "minitask:{app:stuck}:leases holds another type", reason="script")


def test_only_a_fetch_sent_after_the_refusal_serves_the_queue_again(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    now = [500.0]
    monkeypatch.setattr(outages.time, "monotonic", lambda: now[0])
    refusals = QueueRefusals()
    in_flight_since = now[0] - 0.004
    refusals.refused("stuck", REFUSED)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=outages.logger.name):
        refusals.served("stuck", in_flight_since)  # sent before: proves nothing
        assert refusals.known("stuck") and not caplog.records
        now[0] += 1.0
        refusals.served("stuck", now[0] - 0.001)  # sent after: the keys were fixed
    assert not refusals.known("stuck")
    [line] = [record.getMessage() for record in caplog.records]
    assert "'stuck' served again" in line
