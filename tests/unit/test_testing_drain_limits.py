"""drain runs a rate-limited backlog on its own clock, and its limit of attempts
bounds a task that enqueues itself for ever (issue 29, M3)."""
from __future__ import annotations

import time
from typing import Any, List

import pytest

from minitask import ConfigurationError, Minitask
from minitask.testing import DRAIN_LIMIT, drain, isolated


def rated_app(rate: str = "1/s") -> Any:
    app = Minitask("shop", broker="redis://127.0.0.1:1/0")
    started: List[int] = []
    app.started = started  # type: ignore[attr-defined]

    @app.task(name="rated", rate_limit=rate)
    def rated(x: int) -> int:
        started.append(app.clock.now_ms())
        return x

    return app


def test_a_rate_limited_backlog_runs_within_advance_a_turn_apart_on_drains_clock() -> None:
    app = rated_app()
    with isolated(app):
        start = app.clock.now_ms()
        handles = [app.tasks["rated"].delay(i) for i in range(5)]
        assert drain(app) == 1  # no time moves: only the first may start
        assert drain(app, advance=10) == 4
        assert [h.status() for h in handles] == ["succeeded"] * 5
        gaps = [b - a for a, b in zip(app.started, app.started[1:])]
        # a turn apart on drain's clock: the window (1 s) and its small guard
        assert app.started[0] == start and all(1000 <= gap < 1100 for gap in gaps), gaps
        assert app.clock.now_ms() == start + 10_000


def test_what_cannot_start_within_advance_stays_queued_until_a_later_drain() -> None:
    app = rated_app()
    with isolated(app):
        handles = [app.tasks["rated"].delay(i) for i in range(5)]
        assert drain(app, advance=2.5) == 3
        assert [h.status() for h in handles].count("queued") == 2
        assert drain(app, advance=10) == 2
        assert drain(app, advance=3600) == 0


def test_the_isolated_servers_time_is_the_test_clock() -> None:
    app = rated_app()
    with isolated(app):
        app.clock.advance(7200)
        seconds, micros = app.broker.client.time()
        assert seconds * 1000 + micros // 1000 == app.clock.now_ms()


def test_max_running_tasks_all_run() -> None:
    app = Minitask("shop", broker="redis://127.0.0.1:1/0")

    @app.task(name="one_at_a_time", max_running=1)
    def one_at_a_time(x: int) -> int:
        return x

    with isolated(app):
        handles = [one_at_a_time.delay(i) for i in range(5)]
        assert drain(app) == 5
        assert [h.get(timeout=1) for h in handles] == list(range(5))


def test_a_task_enqueueing_itself_for_ever_ends_soon_naming_it() -> None:
    app = Minitask("shop", broker="redis://127.0.0.1:1/0")

    @app.task(name="again")
    def again() -> None:
        app.tasks["again"].delay()

    assert DRAIN_LIMIT <= 1000  # some 20 ms an attempt in memory: seconds, not hours
    with isolated(app):
        again.delay()
        began = time.monotonic()
        with pytest.raises(RuntimeError, match="limit of 50 attempts: does task 'again'"):
            drain(app, limit=50)
        assert time.monotonic() - began < 30
        with pytest.raises(ConfigurationError, match="limit"):
            drain(app, limit=0)
