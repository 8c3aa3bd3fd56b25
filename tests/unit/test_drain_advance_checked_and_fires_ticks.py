"""drain(app, advance=...): the span checked (a ConfigurationError naming it, never a
raw ValueError or OverflowError), and the app's schedules fired in the window, each
tick once and in due order, as a worker up all along would (SPEC: "periodic ticks
included"); a window of too many ticks refused before anything runs."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import ConfigurationError, Minitask, current_task, testing
from minitask.testing import DRAIN_TICKS, TestClock, drain, isolated


def make_app(broker: Any, runs: List[str]) -> Minitask:
    app = Minitask("ticking", broker=broker)

    def beat() -> str:
        context = current_task()
        assert context is not None
        runs.append(context.id.split("@")[0] if "@" in context.id else "sale")
        return context.id

    app.periodic(every=10.0, name="beat")(beat)
    app.task(name="sale")(beat)
    app.periodic(every=3600.0, name="hourly")(beat)
    return app


@pytest.mark.parametrize("advance", [float("nan"), float("inf"), float("-inf"), -5, -0.001,
                                     "5", None, True, 1e300, 10 ** 400, 10 ** 5000],
                         ids=["nan", "inf", "-inf", "-5", "-0.001", "str", "None", "True",
                              "1e300", "10**400", "10**5000"])
def test_a_span_that_is_no_finite_number_of_seconds_is_refused_naming_advance(
        fake_redis: Any, advance: Any) -> None:
    app = make_app(fake_redis, [])
    with isolated(app):
        before = app.clock.now_ms()
        with pytest.raises(ConfigurationError, match=r"drain\(advance=\.\.\.\) takes a finite "
                                                     r"number of seconds, 0 or more"):
            drain(app, advance=advance)
        assert app.clock.now_ms() == before
        clock = app.clock
        assert isinstance(clock, TestClock)
        with pytest.raises(ConfigurationError, match=r"TestClock.advance\(seconds\)"):
            clock.advance(advance)
        assert app.clock.now_ms() == before


def test_every_tick_in_the_window_runs_once_in_due_order_with_the_tasks(
        fake_redis: Any) -> None:
    runs: List[str] = []
    app = make_app(fake_redis, runs)
    with isolated(app):
        clock = app.clock
        assert isinstance(clock, TestClock)
        clock.ms = clock.ms - clock.ms % 3_600_000 + 1  # just after a whole hour
        sale = app.tasks["sale"].apply_in(25, )
        assert drain(app) == 0  # the decorated schedules are armed, none due yet
        assert drain(app, advance=60) == 7  # ticks at 10..60 s, the sale at 25 s
        assert runs == ["beat", "beat", "sale", "beat", "beat", "beat", "beat"]
        assert sale.status() == "succeeded"
        beat = {s.name: s for s in app.schedules()}["beat"]
        assert beat.last_at is not None
        assert int(beat.last_at.timestamp() * 1000) == clock.ms - clock.ms % 10_000
        assert drain(app, advance=9.9) == 0
        assert drain(app, advance=0.1) == 1


#: When the test clock starts (it starts at the real time): 30 s before a whole hour, a
#: 40 s window held the decorated 'hourly' tick too (3 runs, not 2: a flake in 1 run of
#: 90), or now
WALL_STARTS = {"before-a-whole-hour": lambda now: now - now % 3_600_000 + 3_570_000,
               "now": lambda now: now}


@pytest.mark.parametrize("start", list(WALL_STARTS), ids=list(WALL_STARTS))
def test_a_schedule_added_at_run_time_fires_too(fake_redis: Any, start: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    now = testing.wall_ms()
    monkeypatch.setattr(testing, "wall_ms", lambda: WALL_STARTS[start](now))
    runs: List[str] = []
    app = make_app(fake_redis, runs)
    with isolated(app):
        clock = app.clock
        assert isinstance(clock, TestClock)
        clock.ms = clock.ms - clock.ms % 3_600_000 + 1  # just after a whole hour
        app.remove_schedule("beat")
        app.add_schedule("added", "sale", every=20.0)
        assert drain(app, advance=40) == 2
        assert runs == ["added", "added"]


def test_a_window_of_too_many_ticks_is_refused_before_anything_runs(fake_redis: Any) -> None:
    runs: List[str] = []
    app = make_app(fake_redis, runs)
    with isolated(app):
        clock = app.clock
        assert isinstance(clock, TestClock)
        clock.ms = clock.ms - clock.ms % 3_600_000 + 1  # just after a whole hour
        app.tasks["sale"].delay()
        before = app.clock.now_ms()
        with pytest.raises(ConfigurationError) as refused:
            drain(app, advance=(DRAIN_TICKS + 1) * 10)
        said = str(refused.value)
        assert f"DRAIN_TICKS={DRAIN_TICKS:,}" in said and "'beat'" in said
        assert "app.remove_schedule" in said
        assert runs == [] and app.clock.now_ms() == before
        # the way out it names: the schedule removed for this test
        app.remove_schedule("beat")
        assert drain(app, advance=(DRAIN_TICKS + 1) * 10) == 1 + 2  # the sale, 'hourly' twice
    assert set(app.periodic_schedules) == {"beat", "hourly"}  # put back on exit
