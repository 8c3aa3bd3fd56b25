"""A worker says that dead-letterings deleted old dead letters at most once a queue a
minute (``TRIMMED_SAID_EVERY``, on the app's clock): a queue at its cap failing
1,000 times a second logs no 1,000 lines a second; the next line says how many were
deleted since the last."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.worker.outcomes import TRIMMED_SAID_EVERY
from tests.unit.test_dead_letters_bounded import _plant_dead


def _said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if "dead_letters_max" in r.getMessage()]


def test_trims_within_a_minute_give_one_line_and_the_next_carries_the_sum(
        fake_redis: Any, clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = Minitask("throttled", broker=fake_redis, clock=clock, dead_letters_max=3)

    @app.task(name="fails")
    def fails() -> None:
        raise ValueError("no")

    assert TRIMMED_SAID_EVERY == 60
    _plant_dead(app, 4, clock.now_ms() - 10_000)
    worker = app.worker()
    with caplog.at_level(logging.WARNING, logger="minitask.worker.outcomes"):
        fails.delay()
        assert worker.run_once()  # deletes 2: said at once
        assert [line.split(" as ")[0] for line in _said(caplog)] == [
            "queue 'default': 2 oldest dead letter(s) deleted"]
        for _ in range(2):  # each deletes 1, within the minute: not said
            clock.advance(29)
            fails.delay()
            assert worker.run_once()
        assert len(_said(caplog)) == 1
        clock.advance(2.001)  # 60.001 s after the line: the next says the 2 unsaid and its 1
        fails.delay()
        assert worker.run_once()
        said = _said(caplog)
    assert [line.split(" as ")[0] for line in said] == [
        "queue 'default': 2 oldest dead letter(s) deleted",
        "queue 'default': 3 oldest dead letter(s) deleted"]
    assert len(app.dead_letters()) == 3
    assert fake_redis.get(queue_keys("throttled", "default").dead_trimmed) == b"5"
