"""Schedules in Redis and ticks fired by workers, with a manual clock.

Written once against ``redis_client`` (fakeredis, and the suite's real
redis-server), so every schedule script runs on both. Two apps on one server
stand for two workers racing for the same tick.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, List

import pytest
import redis

from minitask import ConfigurationError, Minitask, Worker, current_task
from minitask.broker.keys import queue_keys
from minitask.stores.schedules import Armed
from tests.support.clock import ManualClock
from tests.support.draining import drain

#: The manual clock starts here (ms): a multiple of every period used below.
START = 1_800_000_000_000


def make_periodic(make_app: Callable[..., Minitask], runs: List[str], **options: Any) -> Minitask:
    """An app with one task, ``beat``, which records the id of each run."""
    app = make_app("p")

    def beat(label: str = "") -> None:
        context = current_task()
        assert context is not None and context.eta is not None
        runs.append(context.id)

    app.task(name="beat")(beat)
    if options:
        app.periodic(name="every10", **options)(beat)
    return app


def started(app: Minitask) -> Worker:
    worker = app.worker(burst=True)
    worker.starting()  # what run() does first: writes the decorated schedules
    return worker


def test_a_decorated_schedule_fires_each_tick_once_with_a_derived_id(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    app = make_periodic(make_app, runs, every=10.0)
    worker = started(app)
    assert drain(worker) == 0  # nothing due before the first tick
    for _ in range(3):
        clock.advance(10)
        assert drain(worker) == 1
    assert runs == ["every10@2027-01-15T08:00:10.000Z", "every10@2027-01-15T08:00:20.000Z",
                    "every10@2027-01-15T08:00:30.000Z"]
    (schedule,) = app.schedules()
    assert schedule.last_at is not None and schedule.next_at is not None
    assert int(schedule.last_at.timestamp() * 1000) == START + 30_000
    assert int(schedule.next_at.timestamp() * 1000) == START + 40_000


def test_two_workers_racing_for_a_tick_produce_one_run(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        clock: ManualClock) -> None:
    runs: List[str] = []
    first = started(make_periodic(make_app, runs, every=10.0))
    second = started(make_periodic(make_app, runs, every=10.0))
    assert first.run_once() is False and second.run_once() is False  # both read the schedule
    clock.advance(10)
    ran = [first.run_once(), second.run_once(), first.run_once(), second.run_once()]
    assert ran.count(True) == 1 and runs == ["every10@2027-01-15T08:00:10.000Z"]
    clock.advance(10)
    ran = [second.run_once(), first.run_once(), second.run_once()]
    assert ran.count(True) == 1 and len(runs) == 2


def test_a_stale_fire_is_refused_by_the_armed_tick(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_periodic(make_app, [], every=10.0)
    started(app)
    store = app.broker.schedules
    (entry,) = store.armed(["default"])["default"]
    assert entry.tick_ms == START + 10_000
    clock.advance(10)
    schedule = entry.schedule
    assert schedule is not None
    run = (START + 10_000, schedule.tick_id(START + 10_000), b"body", 5)
    fired = store.fire(entry, START + 10_000, START + 20_000, run, clock.now_ms())
    assert (fired.status, fired.armed_ms) == ("fired", START + 20_000)
    again = store.fire(entry, START + 10_000, START + 20_000, run, clock.now_ms())
    assert (again.status, again.armed_ms) == ("moved", START + 20_000)
    changed = Armed(entry.name, entry.record + b" ", schedule, entry.tick_ms)
    assert store.fire(changed, START + 20_000, START + 30_000, None, clock.now_ms()).status \
        == "changed"
    k = queue_keys("p", "default")
    assert app.broker.client.hlen(k.messages) == 1


def test_after_downtime_latest_runs_one_catch_up_then_regular_ticks(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    worker = started(make_periodic(make_app, runs, every=10.0))
    drain(worker)
    clock.advance(55)  # ticks at +10 .. +50 missed
    assert drain(worker) == 1
    assert runs == ["every10@2027-01-15T08:00:50.000Z"]
    clock.advance(5)
    assert drain(worker) == 1 and runs[-1] == "every10@2027-01-15T08:01:00.000Z"


def test_after_downtime_skip_runs_none_then_regular_ticks(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    worker = started(make_periodic(make_app, runs, every=10.0, catch_up="skip"))
    drain(worker)
    clock.advance(55)
    assert drain(worker) == 0 and runs == []
    clock.advance(5)
    assert drain(worker) == 1 and runs == ["every10@2027-01-15T08:01:00.000Z"]


def test_a_short_stall_within_the_grace_loses_no_tick(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    app = make_app("p")

    def beat() -> None:
        runs.append(current_task().id)  # type: ignore[union-attr]

    app.periodic(every=0.2, name="fast")(beat)
    worker = started(app)
    drain(worker)
    clock.advance(0.2 + 0.9)  # five ticks due, the oldest 0.9 s ago
    assert drain(worker) == 5
    assert [run[-7:] for run in runs] == ["00.200Z", "00.400Z", "00.600Z", "00.800Z", "01.000Z"]


def test_overlap_false_skips_a_tick_while_the_last_run_is_pending(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        clock: ManualClock) -> None:
    runs: List[str] = []
    app = make_periodic(make_app, runs, every=10.0, overlap=False)
    firing = started(app)
    firing.run_once()
    clock.advance(10)
    # the first run is fired and leased, but not finished when the next tick comes
    job = firing.fetch()
    assert job is not None and job.task_id.endswith("08:00:10.000Z")
    clock.advance(10)
    assert firing.fetch() is None  # tick +20 skipped: the run of +10 still runs
    firing.execute(job)
    clock.advance(10)
    assert drain(firing) == 1
    assert runs == ["every10@2027-01-15T08:00:10.000Z", "every10@2027-01-15T08:00:30.000Z"]


def test_runs_overlap_by_default(make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    worker = started(make_periodic(make_app, runs, every=10.0))
    worker.run_once()
    clock.advance(10)
    job = worker.fetch()
    assert job is not None
    clock.advance(10)
    second = worker.fetch()
    assert second is not None and second.task_id.endswith("08:00:20.000Z")


def test_rewriting_an_unchanged_decorator_keeps_the_armed_tick_a_changed_one_wins(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    first = make_periodic(make_app, [], every=10.0)
    started(first)
    clock.advance(25)  # no worker fired: the armed tick stays at +10
    started(make_periodic(make_app, [], every=10.0))
    (kept,) = first.schedules()
    assert kept.next_at is not None and int(kept.next_at.timestamp() * 1000) == START + 10_000
    started(make_periodic(make_app, [], every=60.0))  # a new deploy with a new decorator
    (changed,) = first.schedules()
    assert changed.every == 60.0
    assert changed.next_at is not None
    assert int(changed.next_at.timestamp() * 1000) == START + 60_000


def test_add_and_remove_schedule_at_run_time(make_app: Callable[..., Minitask],
                                             clock: ManualClock) -> None:
    runs: List[str] = []
    app = make_periodic(make_app, runs)
    worker = started(app)
    assert drain(worker) == 0
    added = app.add_schedule("nightly-42", "beat", every=10.0, args=("n",))
    assert added.next_at is not None and int(added.next_at.timestamp() * 1000) == START + 10_000
    worker._source.wait()  # the add woke the idle worker: it reads the schedules again
    clock.advance(10)
    assert drain(worker) == 1 and runs == ["nightly-42@2027-01-15T08:00:10.000Z"]
    assert app.remove_schedule("nightly-42") is True
    assert app.remove_schedule("nightly-42") is False
    clock.advance(10)
    assert drain(worker) == 0 and app.schedules() == []


def test_add_schedule_moves_a_schedule_between_queues(make_app: Callable[..., Minitask]) -> None:
    app = make_periodic(make_app, [])
    app.add_schedule("moving", "beat", every=10.0)
    app.add_schedule("moving", "beat", every=10.0, queue="other", priority=9)
    (schedule,) = app.schedules()
    assert (schedule.queue, schedule.priority) == ("other", 9)
    assert app.broker.client.hlen(queue_keys("p", "default").schedules) == 0


def test_a_busy_worker_reads_schedules_again_within_the_refresh_period(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    runs: List[str] = []
    app = make_periodic(make_app, runs)
    worker = started(app)
    beat = app.tasks["beat"]
    assert worker.run_once() is False  # its first look reads the schedules: none yet
    beat.delay()
    assert worker.run_once() is True  # busy from now on: it never waits
    app.add_schedule("late", beat, every=1.0)
    clock.advance(1)
    beat.delay()
    assert drain(worker) == 1  # the tick at +1 is due, but not heard of yet
    clock.advance(4)  # the refresh period since the worker first read the schedules
    beat.delay()
    drain(worker)
    # heard of now; its first tick, 4 s old, is caught up with the latest one
    assert [run for run in runs if run.startswith("late@")] == [
        "late@2027-01-15T08:00:05.000Z"]


def test_a_schedule_without_ticks_left_stays_dormant(make_app: Callable[..., Minitask],
                                                     clock: ManualClock) -> None:
    app = make_periodic(make_app, [])
    app.add_schedule("leap", "beat", cron="0 0 29 2 *")  # next: 2028-02-29
    (schedule,) = app.schedules()
    assert schedule.next_at is not None and schedule.next_at.year == 2028


def test_cron_without_cronsim_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)
    app = Minitask("p", broker="redis://127.0.0.1:1/0")
    with pytest.raises(ConfigurationError, match=r"pip install 'minitask\[cron\]'"):
        app.periodic(cron="0 3 * * *", name="nightly")(lambda: None)
    app.periodic(every=5.0, name="fine")(lambda: None)


def test_the_docs_example_runs(fake_redis: "redis.Redis[bytes]",
                               capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "periodic.rst").read_text()
    section = readme[readme.index("Periodic tasks\n=============="):]
    lines = section[section.index(".. code-block:: python"):].splitlines()[2:]
    block = []
    for line in lines:
        if line and not line.startswith("   "):
            break
        block.append(line[3:])
    # the example imports Minitask; here it gets one on fakeredis instead
    source = "\n".join(block).replace("from minitask import Minitask\n", "")
    assert "app.add_schedule(" in source

    def on_fake_redis(name: str, broker: Any = None, **options: Any) -> Minitask:
        return Minitask(name, broker=fake_redis, **options)

    exec(compile(source, "periodic.rst", "exec"), {"__name__": "readme", "Minitask": on_fake_redis})
    printed = capsys.readouterr().out
    assert "nightly-42 readme.report 0 3 * * * UTC" in printed
    assert Minitask("shop", broker=fake_redis).schedules() == []
