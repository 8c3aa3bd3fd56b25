"""The worker's lines said at most once a minute (``log_throttle``) say what they always
said: the first at once, then one a minute counting those held back since the last, and
a line that ends a run says the rest; on a clock the test moves (no sleeps)."""
from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any, List

import pytest

from minitask.worker.control import UNKNOWN_SAID_EVERY, Orders
from minitask.worker.outages import QueueRefusals
from minitask.worker.pools.starts import SAY_AGAIN_AFTER, Respawns


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    return clock


def said(caplog: pytest.LogCaptureFixture, name: str) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == name and r.levelno >= logging.WARNING]


def test_children_dying_at_start_are_said_at_the_second_then_counted_once_a_minute(
        now: List[float], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="minitask")
    respawns = Respawns()
    for pid in range(1, 18):  # 4.01 s apart: one row; the 17th dies 60.15 s after the 2nd
        respawns.started(pid)
        now[0] += 0.01
        assert respawns.ended(pid, served=False)
        respawns.exited(pid, 1)
        now[0] += 4
    assert SAY_AGAIN_AFTER == 60
    lines = said(caplog, "minitask.worker.pools.starts")
    assert len(lines) == 3, lines
    assert "child 1 exited" in lines[0] and "the second in a row" in lines[1]
    assert "15 more in a row since the last warning, the last (child 17)" in lines[2], lines


def test_unknown_orders_are_said_with_one_of_them_and_how_many_more(
        now: List[float], caplog: pytest.LogCaptureFixture) -> None:
    registry = SimpleNamespace(app_keys=SimpleNamespace(control=lambda worker: "ctl"))
    orders = Orders(registry, "w1", lambda why: None)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="minitask.worker.control"):
        orders._ignore(["first"])
        orders._ignore(["second", "third"])
        now[0] += UNKNOWN_SAID_EVERY - 1
        orders._ignore(["fourth"])
        now[0] += 1
        orders._ignore(["fifth"])
        orders._ignore(["sixth", "seventh"])
        orders._ended.set()
        orders._loop()  # ends at once, saying the rest
    lines = said(caplog, "minitask.worker.control")
    assert lines == [
        "worker w1 ignores the unknown order 'first', taken off ctl",
        "worker w1 ignores the unknown order 'second' and 3 more (said at most once a "
        "minute), taken off ctl",
        "worker w1 ignores the unknown order 'sixth' and 1 more (said at most once a "
        "minute), taken off ctl"], lines


def test_a_queue_set_aside_is_said_then_counted_and_said_afresh_once_served(
        now: List[float], caplog: pytest.LogCaptureFixture) -> None:
    refusals = QueueRefusals()
    exc: Any = type("Refused", (Exception,), {"reason": "wrong type"})("WRONGTYPE in q")
    with caplog.at_level(logging.WARNING, logger="minitask.worker.outages"):
        for _ in range(4):  # one said, three held back
            refusals.refused("q", exc)
            now[0] += 10
        now[0] += SAY_AGAIN_AFTER - 40
        refusals.refused("q", exc)  # 60 s after the first: the three and this one
        refusals.served("q", now[0])
        refusals.refused("q", exc)  # refused again: said at once, as a first
    lines = said(caplog, "minitask.worker.outages")
    assert len(lines) == 4, lines
    assert lines[0].startswith("queue 'q' set aside")
    assert "Redis refused 4 fetch(es) from it since the last warning" in lines[1], lines[1]
    assert "served again" in lines[2] and lines[3].startswith("queue 'q' set aside")
