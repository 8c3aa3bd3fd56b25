"""A worker's outcome writes replicas leave unconfirmed are said once an outage, then
counted: a summary at most every SUMMARY_EVERY seconds, one at its end, and the count
in the heartbeat's fields (issue 29; the real worker's test is
tests/integration/test_unconfirmed_outcomes_said_once.py)."""
from __future__ import annotations

import logging
from typing import List

import pytest

from minitask.worker import unconfirmed as module
from minitask.worker.unconfirmed import SUMMARY_EVERY, UnconfirmedWrites


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    return clock


def said(caplog: pytest.LogCaptureFixture, level: int) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_an_outage_is_said_once_then_summed_up(
        now: List[float], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="minitask")
    writes = UnconfirmedWrites()
    assert writes.heartbeat(5_000) == {"unconfirmed": 0, "unconfirmed_ms": 0}
    for n in range(50):
        now[0] += 0.1
        writes.seen(f"record the result of task t{n}", RuntimeError("0 of 1 replica(s)"))
    assert len(said(caplog, logging.ERROR)) == 1
    assert "t0" in said(caplog, logging.ERROR)[0]
    assert said(caplog, logging.WARNING) == []  # no summary before SUMMARY_EVERY
    assert writes.heartbeat(5_000) == {"unconfirmed": 50, "unconfirmed_ms": 5_000}
    now[0] += SUMMARY_EVERY
    writes.seen("record the result of task t50", RuntimeError("0 of 1"))
    summary = said(caplog, logging.WARNING)
    assert len(summary) == 1 and summary[0].startswith("50 more outcome write(s)"), summary
    now[0] += 1.0
    writes.tick()  # nothing new since: nothing said
    assert len(said(caplog, logging.WARNING)) == 1
    assert writes.pending
    writes.confirmed()
    end = said(caplog, logging.WARNING)[-1]
    assert "51 outcome write(s) were left unconfirmed" in end, end
    assert not writes.pending
    assert writes.heartbeat(9_000) == {"unconfirmed": 0, "unconfirmed_ms": 0}
    writes.seen("record the result of task u", RuntimeError("0 of 1"))  # a new outage
    assert len(said(caplog, logging.ERROR)) == 2
    now[0] += 5.0
    writes.seen("record the result of task v", RuntimeError("0 of 1"))
    writes.stopped()  # the worker stops in it: summed up, and afresh for the next
    end = said(caplog, logging.WARNING)[-1]
    assert "stops with 2 outcome write(s)" in end and "(1 not said before)" in end, end
    assert writes.heartbeat(9_000) == {"unconfirmed": 0, "unconfirmed_ms": 0}
    assert not writes.pending
