"""An outcome written again after its first write's reply was lost (``BrokerError.sent``:
a stall past the socket timeout) and finding no lease is said to have been most likely
recorded by that first write, not blamed on Redis losing data (issue 29, probe35 M5):
at INFO while the lease had time left, at WARNING when it may have expired first (it may
run again). The ids are forgotten once said or recorded: a later true loss is said as
one."""
from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from minitask.errors import BrokerError
from minitask.stores.queue import Delivery
from minitask.worker import outcome_batches
from minitask.worker.leases import Holdings, Job
from minitask.worker.outcome_batches import note_refused, recorded
from tests.support.clock import ManualClock

LEASE_MS = 30_000
FIRST_WRITE = "most likely recorded by that write"
LOST = "Redis lost it"


@pytest.fixture(autouse=True)
def nothing_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    """No outcome refused or unanswered in this process before (another test's ids)."""
    monkeypatch.setattr(outcome_batches, "_refused", set())
    monkeypatch.setattr(outcome_batches, "_unanswered", set())


def _held(clock: ManualClock, task_id: str) -> "tuple[Holdings, Job]":
    holdings, job = Holdings(), Job("default", Delivery(task_id, b"", 1, 5))
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    holdings.hold("default", [job])
    return holdings, job


def _said(caplog: pytest.LogCaptureFixture, holdings: Holdings, job: Job, clock: ManualClock,
          still_held: bool = False) -> "list[tuple[int, str]]":
    caplog.clear()
    with caplog.at_level(logging.INFO):
        host: Any = SimpleNamespace(clock=clock)
        recorded(job, still_held, holdings, host)
    return [(record.levelno, record.getMessage()) for record in caplog.records]


def test_a_retry_after_a_lost_reply_is_not_said_lost_by_redis(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    holdings, job = _held(clock, "a")
    note_refused([job], BrokerError("could not record: Timeout reading from socket",
                                    reason="unreachable", sent=True))
    clock.advance(2)
    [(level, text)] = _said(caplog, holdings, job, clock)
    assert level == logging.INFO and FIRST_WRITE in text and "first write's reply" in text
    assert LOST not in text and "no longer held" not in text and "expired" not in text
    # said once: a later loss of the same id is Redis's again
    [(level, text)] = _said(caplog, holdings, job, clock)
    assert level == logging.WARNING and LOST in text


def test_a_retry_after_a_lost_reply_past_a_late_renewal_may_have_expired(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    holdings, job = _held(clock, "a")
    note_refused([job], BrokerError("could not record: Connection reset",
                                    reason="unreachable", sent=True))
    clock.advance(40)  # stalled past the lease
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    [(level, text)] = _said(caplog, holdings, job, clock)
    assert level == logging.WARNING and FIRST_WRITE in text
    assert "delivered again" in text and LOST not in text


def test_an_unsent_failure_or_a_held_lease_forgets_nothing_wrongly(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    holdings, job = _held(clock, "a")
    note_refused([job], BrokerError("could not record: Connection refused",
                                    reason="unreachable"))  # not sent
    [(_, text)] = _said(caplog, holdings, job, clock)
    assert LOST in text and FIRST_WRITE not in text
    # refused part way (an ACL changed): the lease stays, no lost reply
    note_refused([job], BrokerError("could not record: NOPERM", reason="permission",
                                    sent=True))
    [(_, text)] = _said(caplog, holdings, job, clock)
    assert FIRST_WRITE not in text and "refused to record its outcome for the ACL" in text
    note_refused([job], BrokerError("could not record: Timeout", reason="unreachable",
                                    sent=True))
    assert _said(caplog, holdings, job, clock, still_held=True) == []  # recorded: forgotten
    [(_, text)] = _said(caplog, holdings, job, clock)
    assert LOST in text
