"""Schedules without Redis: checks at decoration time, tick times (DST included), catch-up.

Every time here is chosen, never read from a clock: next-fire times across DST
changes are computed from a given "now".
"""
from __future__ import annotations

import datetime as dt
from typing import Any, List
from zoneinfo import ZoneInfo

import pytest

from minitask import ArgumentError, ConfigurationError, EncodeError, Minitask, Schedule, Task
from minitask.periodic import GRACE_MS, from_record
from tests.unit.test_layering import imports_of

UTC = dt.timezone.utc


def ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def local(zone: str, *fields: int, fold: int = 0) -> int:
    """Unix ms of a wall-clock time in ``zone``."""
    return ms(dt.datetime(*fields, tzinfo=ZoneInfo(zone), fold=fold))  # type: ignore[misc]


def utc(*fields: int) -> int:
    return ms(dt.datetime(*fields, tzinfo=UTC))  # type: ignore[misc]


def ticks(schedule: Schedule, start: int, count: int) -> List[int]:
    found, at = [], start
    for _ in range(count):
        following = schedule.next_after(at)
        assert following is not None
        found.append(following)
        at = following
    return found


# a port nothing listens on: decorating must not touch Redis
pytestmark = pytest.mark.app("periodic-unit", on="offline")


def cron(expression: str, tz: str = "UTC", **options: Any) -> Schedule:
    return Schedule(name="s", task="t", cron=expression, tz=tz, **options)


# -- decoration: the task, and every bad input raised at once -------------------------

def test_periodic_registers_a_task_that_keeps_its_methods(app: Minitask) -> None:
    @app.periodic(every=30.0, queue="maintenance", priority=2)
    def sweep() -> str:
        return "swept"

    assert isinstance(sweep, Task)
    assert sweep() == "swept" and sweep.queue == "maintenance" and sweep.priority == 2
    schedule = app.periodic_schedules[sweep.name]
    assert (schedule.task, schedule.every, schedule.queue, schedule.priority) == (
        sweep.name, 30.0, "maintenance", 2)
    assert schedule.name == sweep.name  # named after the task


def test_periodic_name_names_both_task_and_schedule(app: Minitask) -> None:
    @app.periodic(cron="*/15 * * * *", tz="Europe/Paris", name="digest", args=(1,),
                  kwargs={"to": "all"})
    def send_digest(level: int, to: str) -> None: ...

    assert send_digest.name == "digest"
    schedule = app.periodic_schedules["digest"]
    assert (schedule.cron, schedule.tz, schedule.args, schedule.kwargs) == (
        "*/15 * * * *", "Europe/Paris", (1,), {"to": "all"})


@pytest.mark.parametrize("options,words", [
    ({"cron": "* * * * *", "every": 5.0}, "exactly one of cron"),
    ({}, "exactly one of cron"),
    ({"cron": "61 * * * *"}, "invalid cron"),
    ({"cron": "* * * *"}, "has 4 field"),
    ({"cron": "0 * * * * *"}, "has 6 field"),
    ({"cron": "0 0 31 2 *"}, "invalid cron"),
    ({"cron": 15}, "cron must be a str"),
    ({"every": 0}, "every must be"),
    ({"every": -1.0}, "every must be"),
    ({"every": float("nan")}, "every must be"),
    ({"every": True}, "every must be"),
    ({"every": "5"}, "every must be"),
    ({"every": 5.0, "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
    ({"every": 5.0, "tz": ""}, "tz must be"),
    ({"cron": "0 3 * * *", "tz": "Europe/Pariss"}, "unknown time zone"),
    ({"every": 5.0, "catch_up": "all"}, "catch_up must be 'latest' or 'skip'"),
    ({"every": 5.0, "overlap": "no"}, "overlap must be True or False"),
])
def test_bad_schedule_is_a_value_error_naming_the_schedule_at_decoration(
        app: Minitask, options: Any, words: str) -> None:
    with pytest.raises(ValueError, match="schedule 'nightly'") as raised:
        app.periodic(name="nightly", **options)(lambda: None)
    assert isinstance(raised.value, ConfigurationError)
    assert words in str(raised.value)
    assert "nightly" not in app.tasks and "nightly" not in app.periodic_schedules


def test_arguments_that_do_not_fit_or_encode_fail_at_decoration(app: Minitask) -> None:
    def report(customer: int) -> None: ...

    with pytest.raises(ArgumentError, match="schedule 'r'.*arguments do not fit"):
        app.periodic(every=60.0, name="r", args=(1, 2))(report)
    with pytest.raises(EncodeError, match=r"args\[0\]"):
        app.periodic(every=60.0, name="r", args=(object(),))(report)
    assert not app.tasks


def test_add_schedule_checks_everything_before_any_io(app: Minitask) -> None:
    @app.task
    def report(customer: int) -> None: ...

    with pytest.raises(ConfigurationError, match="schedule 'n'.*exactly one of"):
        app.add_schedule("n", report)
    with pytest.raises(ConfigurationError, match="schedule 'n'.*task must be a task"):
        app.add_schedule("n", "no.such.task", every=5.0)
    with pytest.raises(ArgumentError, match="schedule 'n'"):
        app.add_schedule("n", report, every=5.0, kwargs={"nobody": 1})
    with pytest.raises(ConfigurationError, match="priority"):
        app.add_schedule("n", report, every=5.0, args=(1,), priority=10)
    with pytest.raises(ConfigurationError, match="name must be a non-empty str"):
        app.add_schedule("", report, every=5.0, args=(1,))


def test_cron_nicknames_are_expanded() -> None:
    app = Minitask("periodic-unit", broker="redis://127.0.0.1:1/0")
    app.periodic(cron="@daily", name="d")(lambda: None)
    assert app.periodic_schedules["d"].cron == "0 0 * * *"


def test_cronsim_is_imported_only_when_a_cron_is_read() -> None:
    found = [item for item in imports_of("periodic") if item.target == "cronsim"]
    assert found and all(item.in_function for item in found)


# -- every: ticks on whole multiples of the period -------------------------------------

def test_every_ticks_fall_on_multiples_of_the_period_since_the_epoch() -> None:
    schedule = Schedule(name="s", task="t", every=0.2)
    assert schedule.next_after(1_000_050) == 1_000_200
    assert schedule.next_after(1_000_200) == 1_000_400  # strictly after
    assert schedule.latest_at_or_before(1_000_399) == 1_000_200
    assert schedule.latest_at_or_before(1_000_400) == 1_000_400


def test_tick_ids_derive_from_name_and_tick() -> None:
    schedule = Schedule(name="nightly-42", task="t", every=1.0)
    assert schedule.tick_id(utc(2026, 1, 2, 3, 4, 5) + 67) == "nightly-42@2026-01-02T03:04:05.067Z"


# -- cron in a time zone, across DST ------------------------------------------------------

def test_cron_is_read_in_its_time_zone() -> None:
    schedule = cron("0 3 * * *", "Europe/Paris")
    assert schedule.next_after(utc(2026, 6, 1, 12)) == utc(2026, 6, 2, 1)  # 03:00 CEST


def test_paris_spring_forward_skips_the_local_time_that_does_not_exist() -> None:
    # 2026-03-29: at 02:00 CET clocks jump to 03:00 CEST; 02:30 does not exist that day
    daily = cron("30 2 * * *", "Europe/Paris")
    assert ticks(daily, utc(2026, 3, 27, 12), 3) == [
        local("Europe/Paris", 2026, 3, 28, 2, 30), local("Europe/Paris", 2026, 3, 30, 2, 30),
        local("Europe/Paris", 2026, 3, 31, 2, 30)]
    half_hourly = cron("*/30 * * * *", "Europe/Paris")
    assert ticks(half_hourly, utc(2026, 3, 29, 0, 15), 3) == [
        utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 30)]
    # 01:30 CET is 00:30 UTC, 03:00 CEST is 01:00 UTC: nothing in between


def test_paris_fall_back_fires_a_repeated_local_time_once() -> None:
    # 2026-10-25: at 03:00 CEST clocks go back to 02:00 CET; 02:00-02:59 happen twice
    daily = cron("30 2 * * *", "Europe/Paris")
    assert ticks(daily, utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]  # 02:30 CEST once, then CET
    half_hourly = cron("*/30 * * * *", "Europe/Paris")
    assert ticks(half_hourly, utc(2026, 10, 24, 23, 15), 4) == [
        utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 2, 0)]  # 02:00 and 02:30 CET (01:00, 01:30 UTC) are repeats


def test_new_york_spring_forward_and_fall_back() -> None:
    zone = "America/New_York"
    # 2026-03-08: 02:00 EST -> 03:00 EDT
    assert ticks(cron("30 2 * * *", zone), utc(2026, 3, 7, 12), 2) == [
        utc(2026, 3, 9, 6, 30), utc(2026, 3, 10, 6, 30)]  # no 02:30 on the 8th
    hourly = cron("0 * * * *", zone)
    assert ticks(hourly, utc(2026, 3, 8, 6, 30), 2) == [utc(2026, 3, 8, 7), utc(2026, 3, 8, 8)]
    # 01:00 EST = 06:00 UTC, then 03:00 EDT = 07:00 UTC: 02:00 never was
    # 2026-11-01: 02:00 EDT -> 01:00 EST; 01:30 happens twice and fires once
    assert ticks(cron("30 1 * * *", zone), utc(2026, 10, 31, 12), 2) == [
        utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    assert ticks(hourly, utc(2026, 11, 1, 4, 30), 3) == [
        utc(2026, 11, 1, 5), utc(2026, 11, 1, 7), utc(2026, 11, 1, 8)]
    # 01:00 EDT (05:00 UTC) fires; 01:00 EST (06:00 UTC) is its repeat; then 02:00 EST


def test_latest_tick_inside_a_repeated_hour_is_the_first_occurrence_before_now() -> None:
    zone = "America/New_York"
    quarter = cron("*/15 * * * *", zone)
    now = local(zone, 2026, 11, 1, 1, 10, fold=1)  # 01:10 EST, the second 01:10
    assert now == utc(2026, 11, 1, 6, 10)
    # the last tick at or before it is 01:45 EDT (05:45 UTC), not 01:00 EST
    assert quarter.latest_at_or_before(now) == utc(2026, 11, 1, 5, 45)
    assert quarter.next_after(now) == utc(2026, 11, 1, 7, 0)  # 02:00 EST


# -- catch-up ------------------------------------------------------------------------------

def test_a_tick_within_the_grace_runs_and_arms_its_successor() -> None:
    schedule = Schedule(name="s", task="t", every=10.0)
    assert schedule.plan(10_000, 10_000 + GRACE_MS) == (10_000, 20_000)


def test_after_downtime_latest_runs_the_most_recent_tick_once() -> None:
    schedule = Schedule(name="s", task="t", every=10.0)
    assert schedule.plan(10_000, 65_000) == (60_000, 70_000)


def test_after_downtime_skip_runs_none_and_arms_the_next_tick() -> None:
    schedule = Schedule(name="s", task="t", every=10.0, catch_up="skip")
    assert schedule.plan(10_000, 65_000) == (None, 70_000)


def test_after_downtime_a_cron_catches_up_its_latest_tick() -> None:
    schedule = cron("0 3 * * *")
    assert schedule.plan(utc(2026, 1, 1, 3), utc(2026, 1, 4, 12)) == (
        utc(2026, 1, 4, 3), utc(2026, 1, 5, 3))


def test_a_record_holds_the_whole_schedule() -> None:
    schedule = Schedule(name="n", task="t", cron="0 3 * * *", tz="Europe/Paris", args=(1, "a"),
                        kwargs={"when": dt.datetime(2026, 1, 1, tzinfo=UTC)}, catch_up="skip",
                        overlap=False, queue="q", priority=7)
    back = from_record(schedule.record())
    assert back == schedule
    assert back.record() == schedule.record()
