"""Why a worker says its lease was lost (``outcome_batches.warn_lost_lease``): a lease
its renewals kept ahead (none of them late) that Redis no longer holds was lost by
Redis, not expired; one held across a late renewal, or with less than the margin
left, or before anything was said, may have expired, and is said so."""
from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from minitask.stores.queue import Delivery
from minitask.worker import outcome_batches
from minitask.worker.leases import LEASE_MARGIN_MS, Holdings, Job
from minitask.worker.outcome_batches import recorded
from tests.support.clock import ManualClock

LEASE_MS = 30_000


@pytest.fixture(autouse=True)
def nothing_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No outcome refused for the ACL in this process before (another test's ids)."""
    monkeypatch.setattr(outcome_batches, "_refused", set())


def _job(task_id: str) -> Job:
    return Job("default", Delivery(task_id, b"", 1, 5))


def _said(caplog: pytest.LogCaptureFixture, holdings: Holdings, job: Job,
          clock: ManualClock) -> str:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        host: Any = SimpleNamespace(clock=clock)
        recorded(job, False, holdings, host)
    return caplog.text


def test_a_lease_renewed_in_time_and_gone_is_said_lost(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, holdings, job = ManualClock(), Holdings(), _job("a")
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    holdings.hold("default", [job])
    for _ in range(5):  # renewed every 10 s, each before the last deadline
        clock.advance(10)
        holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    clock.advance(5)
    text = _said(caplog, holdings, job, clock)
    assert "Redis lost it" in text and "25 s before the lease could expire" in text
    assert "had expired" not in text


def test_a_lease_held_across_a_late_renewal_is_said_expired(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, holdings, job = ManualClock(), Holdings(), _job("a")
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    holdings.hold("default", [job])
    clock.advance(40)  # the worker stalled past its lease: another may have run it
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    clock.advance(1)
    assert "its lease had expired" in _said(caplog, holdings, job, clock)
    # a task fetched after the late renewal is judged by the renewals again
    later = _job("b")
    holdings.hold("default", [later])
    clock.advance(10)
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    assert "Redis lost it" in _said(caplog, holdings, later, clock)


def test_a_renewal_that_ends_past_the_deadline_is_late(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, holdings, job = ManualClock(), Holdings(), _job("a")
    holdings.leased_until(clock.now_ms() + LEASE_MS, clock.now_ms())
    holdings.hold("default", [job])
    started = clock.now_ms() + 10_000  # began in time, ended (an outage) past the deadline
    clock.advance(LEASE_MS / 1000)
    holdings.leased_until(started + LEASE_MS, clock.now_ms())
    assert "its lease had expired" in _said(caplog, holdings, job, clock)


def test_too_little_left_or_nothing_said_is_said_expired(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, holdings, job = ManualClock(), Holdings(), _job("a")
    holdings.hold("default", [job])
    assert "its lease had expired" in _said(caplog, holdings, job, clock)
    holdings.leased_until(clock.now_ms() + LEASE_MARGIN_MS, clock.now_ms())
    assert "its lease had expired" in _said(caplog, holdings, job, clock)
