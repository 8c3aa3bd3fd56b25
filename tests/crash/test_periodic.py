"""Periodic tasks with real worker processes on a real redis-server: each tick runs
once however many workers race for it, a killed worker's part is taken over, ticks
missed while every worker was down are caught up as ``catch_up`` says, runs with
``overlap=False`` never overlap, and schedules changed at run time take effect.

Workers run ``tests.apps.periodic``; its runs leave markers (``marks:run:<task>``)
with their task id, tick, start and end. Windows in which ticks happen are slept
through on purpose (they are the scenario); every other wait polls with a deadline.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence

import pytest
import redis

import tests.apps.periodic as periodic_app
from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.periodic import GRACE_MS
from tests.support.crash_kit import DEADLINE
from tests.support.processes import Processes, exit_code, kill_group
from tests.support.procfs import descendants
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

APP = "tests.apps.periodic"
#: Lease length of the workers: short, so that a killed worker's task comes back soon.
VISIBILITY = 2.0


@dataclass(frozen=True)
class Run:
    task_id: str
    tick: float
    start: float
    end: float
    pid: int
    fired: float  # when a worker fired the tick (the run's enqueued_at)


@dataclass
class PeriodicKit:
    """One test's Redis, its workers, and a client-side app of the same name."""

    server: RedisServer
    processes: Processes
    logs: Path
    client: "redis.Redis[bytes]" = field(init=False)
    app: Minitask = field(init=False)
    workers: List["subprocess.Popen[bytes]"] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = self.server.client()
        self.app = Minitask("periodic", broker=self.server.client())
        self.app.task(name="beat")(periodic_app.beat)
        self.app.task(name="slow")(periodic_app.slow)

    def worker(self, schedules: Sequence[Dict[str, Any]] = (),
               visibility: float = VISIBILITY) -> "subprocess.Popen[bytes]":
        env = {"MINITASK_BROKER_URL": self.server.url, "TEST_VISIBILITY": str(visibility),
               "TEST_PERIODIC": json.dumps(list(schedules))}
        log = self.logs / f"worker-{len(self.workers)}.log"
        process = self.processes.worker(APP, "--pool", "process", "-c", "1", "--loglevel",
                                        "DEBUG", env=env, log=log)
        self.workers.append(process)
        return process

    def wait_ready(self, count: int) -> None:
        """``count`` workers registered, and every child blocked in its wait."""
        wait_until(lambda: self.client.zcard(AppKeys("periodic").workers) >= count
                   and int(self.client.info("clients")["blocked_clients"]) >= count,
                   timeout=DEADLINE, message=f"{count} idle worker(s)")

    def runs(self, task: str) -> List[Run]:
        found = []
        for raw in self.client.lrange(f"marks:run:{task}", 0, -1):
            task_id, tick, start, end, pid, fired = raw.decode().split("|")
            found.append(Run(task_id, float(tick), float(start), float(end), int(pid),
                             float(fired)))
        return sorted(found, key=lambda run: run.tick)

    def wait_runs(self, task: str, count: int, after: float = 0.0) -> List[Run]:
        found: List[Run] = wait_until(
            lambda: (lambda runs: runs if len(runs) >= count else None)(
                [run for run in self.runs(task) if run.tick > after]),
            timeout=DEADLINE, message=f"{count} run(s) of {task} after {after}")
        return found

    def stop(self, process: "subprocess.Popen[bytes]") -> None:
        os.killpg(process.pid, signal.SIGTERM)
        assert exit_code(process) == 0

    def drained(self) -> None:
        """No run left queued or running (the schedules were removed first)."""
        messages = queue_keys("periodic", "default").messages
        wait_until(lambda: self.client.hlen(messages) == 0, timeout=DEADLINE,
                   message="the queued runs to finish")

    def print_logs(self) -> None:
        for index in range(len(self.workers)):
            path = self.logs / f"worker-{index}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()
                print(f"----- {path} (last 80 of {len(lines)} lines)")
                print("\n".join(lines[-80:]))


@pytest.fixture
def kit(start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> Iterator[PeriodicKit]:
    made = PeriodicKit(start_redis(), processes, tmp_path)
    try:
        yield made
    finally:
        if did_fail(request):
            made.print_logs()
        made.client.close()
        made.app.close()


def steps_ms(runs: Sequence[Run]) -> List[int]:
    return [round((b.tick - a.tick) * 1000) for a, b in zip(runs, runs[1:])]


def assert_ids_follow_ticks(runs: Sequence[Run], name: str) -> None:
    for run in runs:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(run.tick))
        assert run.task_id.startswith(f"{name}@{stamp}."), run


@pytest.mark.timeout(180)
def test_three_workers_run_every_tick_exactly_once(kit: PeriodicKit) -> None:
    schedule = [{"name": "tick", "task": "beat", "every": 0.2}]
    workers = [kit.worker(schedule) for _ in range(3)]
    kit.wait_ready(3)
    window_start = time.time()
    time.sleep(6.0)  # the window: ticks every 0.2 s, three workers racing for each
    window_end = time.time()
    assert kit.app.remove_schedule("tick") is True
    kit.drained()
    for worker in workers:
        kit.stop(worker)

    runs = kit.runs("tick")
    ids = [run.task_id for run in runs]
    assert len(ids) == len(set(ids)), "a tick ran twice"
    assert set(steps_ms(runs)) == {200}, f"ticks missing: {steps_ms(runs)}"
    inside = [run for run in runs if window_start < run.tick <= window_end]
    assert len(inside) >= math.floor((window_end - window_start) / 0.2) - 1
    assert_ids_follow_ticks(runs, "tick")
    assert all(run.start >= run.tick for run in runs), "a run started before its tick"


@pytest.mark.timeout(180)
def test_killing_the_worker_that_fired_the_last_tick_loses_no_tick(kit: PeriodicKit) -> None:
    schedule = [{"name": "tick", "task": "beat", "every": 0.5}]
    workers = [kit.worker(schedule) for _ in range(3)]
    kit.wait_ready(3)
    runs = kit.wait_runs("tick", 3)
    last = runs[-1]
    fired_it = [w for w in workers if last.pid in descendants(w.pid) or last.pid == w.pid]
    assert len(fired_it) == 1
    kill_group(fired_it[0])
    killed_at = time.time()

    after = kit.wait_runs("tick", 3, after=killed_at)
    assert kit.app.remove_schedule("tick") is True
    kit.drained()
    for worker in workers:
        if worker is not fired_it[0]:
            kit.stop(worker)

    runs = kit.runs("tick")
    assert len({run.task_id for run in runs}) == len(runs), "a tick ran twice"
    assert set(steps_ms(runs)) == {500}, f"ticks missing: {steps_ms(runs)}"
    following = after[0]
    # the first tick after the kill ran (the killed worker may have fired the one after
    # ``last`` before the kill, on a loaded machine: its run comes back when its lease
    # lapses, and the steps above hold it)
    assert following.tick == pytest.approx((math.floor(killed_at / 0.5) + 1) * 0.5, abs=0.001)
    # fired within the grace (on a loaded machine its run may start later than that)
    assert following.fired - following.tick < GRACE_MS / 1000.0, "the next tick was late"
    assert following.pid != last.pid


@pytest.mark.timeout(180)
def test_ticks_missed_while_no_worker_was_up_are_caught_up_as_catch_up_says(
        kit: PeriodicKit) -> None:
    period = 2.0
    schedules = [{"name": "latest", "task": "beat", "every": period},
                 {"name": "skip", "task": "beat", "every": period, "catch_up": "skip"}]
    first = kit.worker(schedules)
    kit.wait_ready(1)
    kit.wait_runs("latest", 1)
    kit.wait_runs("skip", 1)
    kit.stop(first)
    down_at = time.time()
    # the last ticks the first worker fired: on a loaded machine it may fire one more
    # between the runs seen and its stop, and leave that run queued for the next worker
    last = {schedule.name: schedule.last_at for schedule in kit.app.schedules()}
    assert last["latest"] is not None and last["skip"] is not None, last
    last_latest, last_skip = last["latest"].timestamp(), last["skip"].timestamp()
    # start again just after a tick, five or more ticks later
    restart = (math.floor((down_at + 5 * period) / period) + 1) * period + 0.05
    time.sleep(restart - time.time())  # all workers down: the ticks of this time are missed
    launched = time.time()
    second = kit.worker(schedules)
    latest = kit.wait_runs("latest", 3, after=last_latest)
    skipped = kit.wait_runs("skip", 2, after=last_skip)
    kit.stop(second)

    # The new worker fires both schedules at its first look, whenever it comes: on a
    # loaded machine it may start after the next tick or later (2.7 s under load 11).
    # The catch-up is judged against that look, the fire time its runs carry.
    looked = min(run.fired for run in latest)
    assert looked >= launched - 0.001, f"a run fired before the worker started: {latest}"
    # latest: one catch-up run, of the most recent missed tick, then the regular ticks
    caught_up = [run for run in latest if run.tick <= looked]
    assert len(caught_up) == 1, f"catch-up runs: {caught_up} (looked at {looked})"
    assert caught_up[0].fired == looked
    assert caught_up[0].tick - last_latest >= 5 * period - 0.001
    assert caught_up[0].tick > looked - period  # the latest missed tick, not an older one
    assert set(steps_ms(latest)) == {round(period * 1000)}
    # skip: none of the missed ticks runs; the regular ticks resume
    assert all(run.tick > looked for run in skipped), f"skip ran a missed tick: {skipped}"
    assert set(steps_ms(skipped)) == {round(period * 1000)}
    assert skipped[0].tick - looked < period


@pytest.mark.timeout(180)
def test_runs_of_a_schedule_without_overlap_never_overlap(kit: PeriodicKit) -> None:
    schedule = [{"name": "slowpoke", "task": "slow", "every": 0.2, "overlap": False,
                 "args": [0.5]}]
    # a free worker could overlap; leases of the app's default length: a worker stalled
    # past a 2 s lease on a loaded machine would have its run delivered again (at least
    # once), which is no tick fired while a run was running
    workers = [kit.worker(schedule, visibility=30.0) for _ in range(2)]
    kit.wait_ready(2)
    kit.wait_runs("slowpoke", 4)
    assert kit.app.remove_schedule("slowpoke") is True
    kit.drained()
    for worker in workers:
        kit.stop(worker)

    runs = sorted(kit.runs("slowpoke"), key=lambda run: run.start)
    ids = [run.task_id for run in runs]
    assert len(ids) == len(set(ids)), f"a tick ran twice: {runs}"
    for earlier, later in zip(runs, runs[1:]):
        assert later.start >= earlier.end, f"{later} started while {earlier} ran"
        # the rule holds when a tick is fired: a worker stalled less than the grace fires
        # a tick late, and runs it if the last run has ended by then (a 200 ms step
        # under load: tick .4 fired 0.83 s late, after the run of .2 had ended)
        # (the fire time is in whole ms)
        assert later.fired >= earlier.end - 0.001, f"{later} was fired while {earlier} ran"
    ticks = round((runs[-1].tick - runs[0].tick) / 0.2) + 1
    assert len(runs) < ticks, f"ticks that came while a run was running ran: {runs}"


@pytest.mark.timeout(180)
def test_schedules_added_and_removed_at_run_time_take_effect_within_a_tick(
        kit: PeriodicKit) -> None:
    workers = [kit.worker() for _ in range(2)]  # started with no schedule at all
    kit.wait_ready(2)
    before = time.time()
    added = kit.app.add_schedule("added", "beat", every=0.5)
    assert added.next_at is not None
    # the task is "beat": its runs are marked under its name, with the schedule's ids
    first = kit.wait_runs("beat", 1)[0]
    # its first tick, the first after the add: add_schedule returns the schedule read
    # back, and a worker may fire that tick in between (a loaded machine), the
    # next_at read then being the tick after it
    assert first.tick in (pytest.approx(added.next_at.timestamp(), abs=0.001),
                          pytest.approx(added.next_at.timestamp() - 0.5, abs=0.001))
    assert first.tick >= before - 0.001  # never a tick from before the add
    assert first.task_id.startswith("added@")

    assert kit.app.remove_schedule("added") is True
    removed_at = time.time()
    time.sleep(1.5)  # three periods: a tick fired now would show
    assert all(run.tick <= removed_at for run in kit.runs("beat"))
    assert kit.app.schedules() == []
    for worker in workers:
        kit.stop(worker)
