"""The asyncio pool's loop watch (worker/pools/watchdog.py): what it says when the
loop is held, and how often; a real blocked loop is tests/integration/test_async_pool.py's."""
from __future__ import annotations

import asyncio
import logging
from typing import Iterator, List

import pytest

from minitask.worker.pools.watchdog import SAID_EVERY, LoopWatch

WATCH = "minitask.worker.pools.watchdog"


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    made = asyncio.new_event_loop()
    yield made
    made.close()


def said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [record.getMessage() for record in caplog.records if record.name == WATCH]


def test_the_task_holding_the_loop_is_named_once_a_minute(
        loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    holding = object()
    # the watch's own thread never wakes in this test: its period is an hour
    watch = LoopWatch(loop, lambda: ["shop.slow", "shop.other", "shop.slow"],
                      lambda task: ("shop.slow", "id1") if task is holding else None,
                      blocked_after=3600.0)
    monkeypatch.setattr(asyncio, "current_task", lambda loop=None: holding)
    try:
        with caplog.at_level(logging.WARNING, logger=WATCH):
            watch._blocked()
            watch._blocked()  # the same task within a minute: said once
            (first,) = said(caplog)
            assert first.startswith("task 'shop.slow' (id id1) has blocked the asyncio "
                                    "pool's event loop for more than 3600.0 s")
            assert "(waiting: shop.other)" in first and "asyncio.to_thread" in first
            watch._said["shop.slow"] -= SAID_EVERY  # a minute later
            watch._blocked()
            assert len(said(caplog)) == 2
    finally:
        watch.stop()


def test_a_loop_held_outside_any_attempt_names_the_tasks_waiting(
        loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    watch = LoopWatch(loop, lambda: ["shop.b", "shop.a"], lambda task: None,
                      blocked_after=3600.0)
    monkeypatch.setattr(asyncio, "current_task", lambda loop=None: None)
    try:
        with caplog.at_level(logging.WARNING, logger=WATCH):
            watch._blocked()
            watch._blocked()
            (only,) = said(caplog)
            assert "held by code outside the tasks' coroutines" in only
            assert only.endswith("tasks waiting on it: shop.a, shop.b (said once a minute "
                                 "per task)")
    finally:
        watch.stop()
