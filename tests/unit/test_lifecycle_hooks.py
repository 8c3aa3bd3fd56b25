"""Lifecycle hooks (worker_process_init, worker_ready, worker_shutdown, task_prerun,
task_postrun) and the recycling settings, on fakeredis; real worker processes are in
tests/crash/test_lifecycle_hooks.py and test_recycling.py."""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, List, Tuple

import pytest

from minitask import (ConfigurationError, Minitask, MinitaskError, TaskContext, Worker,
                      current_task)
from minitask.cli import main
from minitask.hooks import Hooks
from minitask.dashboard.views import workers as dashboard_workers
from minitask.worker.pools.recycling import Recycling, recycling_of
from tests.support.draining import drain
from tests.support.outcomes import each_outcome

NEW_EVENTS = ("worker_process_init", "worker_ready", "worker_shutdown", "task_prerun",
              "task_postrun")


def test_the_lifecycle_events_take_plain_functions(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    for event in NEW_EVENTS:
        assert app.on(event, print) is print
    with pytest.raises(ConfigurationError, match="worker_redy.*the events are.*worker_ready"):
        app.on("worker_redy", print)
    with pytest.raises(ConfigurationError, match="must be callable"):
        app.on("task_prerun", 3)  # type: ignore[arg-type]


def test_async_hooks_are_taken_only_where_the_asyncio_pool_awaits_them(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    async def hook(*args: Any) -> None:
        pass

    for event in ("worker_ready", "worker_shutdown", "task_start", "task_success"):
        with pytest.raises(ConfigurationError, match=f"for {event!r} is an async def"):
            app.on(event, hook)
    for event in ("worker_process_init", "task_prerun", "task_postrun"):
        app.on(event, hook)
    assert isinstance(app.worker(pool="asyncio"), Worker)
    for pool in ("thread", "process"):
        with pytest.raises(ConfigurationError,
                           match=f"only on the asyncio pool, not on the {pool} pool: "
                                 f".*hook \\(worker_process_init\\)"):
            app.worker(pool=pool)


def test_prerun_and_postrun_surround_each_attempt_with_its_context_current(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ok, flaky, bad = each_outcome(app)
    heard: List[Tuple[Any, ...]] = []

    def prerun(context: TaskContext) -> None:
        heard.append(("prerun", context.name, context.attempt, current_task() is context))

    def postrun(context: TaskContext, status: str, outcome: Any) -> None:
        shown = type(outcome).__name__ if isinstance(outcome, BaseException) else outcome
        heard.append(("postrun", context.name, context.attempt, current_task() is context,
                      status, shown))

    app.on("task_prerun", prerun)
    app.on("task_postrun", postrun)
    app.on("task_start", lambda context: heard.append(("start", context.name)))
    app.on("task_success", lambda context, value: heard.append(("success", context.name)))
    ok.delay(1)
    flaky.delay(2)
    bad.delay(3)
    drain(app.worker())
    assert current_task() is None
    assert heard == [
        ("start", ok.name), ("prerun", ok.name, 1, True), ("success", ok.name),
        ("postrun", ok.name, 1, True, "succeeded", 1),
        ("start", flaky.name), ("prerun", flaky.name, 1, True),
        ("postrun", flaky.name, 1, True, "retrying", "Retry"),
        ("start", bad.name), ("prerun", bad.name, 1, True),
        ("postrun", bad.name, 1, True, "failed", "ValueError"),
        ("start", flaky.name), ("prerun", flaky.name, 2, True), ("success", flaky.name),
        ("postrun", flaky.name, 2, True, "succeeded", 2),
    ]


def test_a_raising_prerun_or_postrun_hook_is_logged_and_loses_no_task(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    ok, flaky, bad = each_outcome(app)

    def explode(*args: Any) -> None:
        raise RuntimeError("hook bug")

    app.on("task_prerun", explode)
    app.on("task_postrun", explode)
    handles = [ok.delay("v"), flaky.delay("w"), bad.delay("x")]
    with caplog.at_level(logging.ERROR, logger="minitask.hooks"):
        drain(app.worker())
    assert [h.status() for h in handles] == ["succeeded", "succeeded", "failed"]
    assert handles[0].get() == "v" and handles[1].get() == "w"
    assert sum("hook bug" in (r.exc_text or "") for r in caplog.records) == 8


def test_the_thread_pool_inits_each_thread_once_then_is_ready_then_shuts_down(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ok, _, _ = each_outcome(app)
    heard: List[Tuple[str, str]] = []

    def note(event: str) -> Callable[..., None]:
        return lambda *args: heard.append((event, threading.current_thread().name))

    for event in NEW_EVENTS:
        app.on(event, note(event))
    handles = [ok.delay(i) for i in range(6)]
    worker = app.worker(concurrency=3, burst=True)
    app.on("worker_ready", lambda w: heard.append(("ready with", str(w is worker))))
    worker.run()
    assert [h.get() for h in handles] == list(range(6))
    events = [event for event, _ in heard]
    inits = [thread for event, thread in heard if event == "worker_process_init"]
    assert len(inits) == 3 and len(set(inits)) == 3 and "MainThread" not in inits
    assert events[:3] == ["worker_process_init"] * 3
    assert heard[3:5] == [("worker_ready", "MainThread"), ("ready with", "True")]
    assert sorted(events[5:-1]) == ["task_postrun"] * 6 + ["task_prerun"] * 6
    assert {thread for event, thread in heard[5:-1]} <= set(inits)
    assert heard[-1] == ("worker_shutdown", "MainThread")


def test_a_thread_whose_init_fails_takes_no_work_and_the_others_serve(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    ok, _, _ = each_outcome(app)
    lock = threading.Lock()
    tried: List[str] = []
    ran: List[str] = []

    def init(worker: Worker) -> None:
        with lock:
            tried.append(threading.current_thread().name)
            if len(tried) == 1:
                raise RuntimeError("no database")

    app.on("worker_process_init", init)
    app.on("task_prerun", lambda context: ran.append(threading.current_thread().name))
    handles = [ok.delay(i) for i in range(5)]
    with caplog.at_level(logging.ERROR):
        app.worker(concurrency=2, burst=True).run()
    assert [h.get() for h in handles] == list(range(5))
    assert len(tried) == 2 and set(ran) == {tried[1]}
    assert any("1 of 2 thread(s) take no work: the worker_process_init hook" in r.message
               and "RuntimeError: no database" in r.message for r in caplog.records)


def test_a_worker_whose_every_thread_fails_its_init_stops_saying_why_and_runs_nothing(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ok, _, _ = each_outcome(app)
    heard: List[str] = []

    def init(worker: Worker) -> None:
        raise RuntimeError("no database")

    app.on("worker_process_init", init)
    app.on("worker_ready", lambda worker: heard.append("ready"))
    app.on("worker_shutdown", lambda worker: heard.append("shutdown"))
    handle = ok.delay(1)
    with pytest.raises(MinitaskError, match="the thread pool cannot serve: the "
                                            "worker_process_init hook .*init raised "
                                            "RuntimeError: no database"):
        app.worker(concurrency=2, burst=True).run()
    assert heard == ["shutdown"]
    assert handle.status() == "queued"


def test_recycling_limits_are_checked_and_taken_only_by_the_process_pool(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    worker = app.worker(pool="process", max_tasks_per_child=7, max_memory_per_child=300)
    assert worker.recycling == Recycling(7, 300)
    assert app.worker(pool="process").recycling is None
    for pool in ("thread", "asyncio"):
        with pytest.raises(ConfigurationError, match=f"the {pool} pool has none"):
            app.worker(pool=pool, max_tasks_per_child=7)
        with pytest.raises(ConfigurationError, match=f"the {pool} pool has none"):
            app.worker(pool=pool, max_memory_per_child=100)
    for bad in (0, -1, True, 1.5, "7"):
        with pytest.raises(ConfigurationError, match="max_tasks_per_child must be an int"):
            recycling_of("process", bad, None)
        with pytest.raises(ConfigurationError, match="max_memory_per_child must be an int"):
            recycling_of("process", None, bad)


def test_a_child_is_due_for_recycling_at_its_task_count_or_over_its_memory() -> None:
    assert Recycling(max_tasks=3).due(2) is None
    assert Recycling(max_tasks=3).due(3) == "it handled 3 task(s), its --max-tasks-per-child"
    assert Recycling(max_memory_mb=1_000_000).due(10**6) is None
    why = Recycling(max_memory_mb=1).due(1)  # this test process holds more than 1 MB
    assert why is not None and "exceeds --max-memory-per-child 1 MB" in why


def test_the_worker_command_refuses_recycling_on_other_pools(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", "redis://127.0.0.1:1/0")  # never reached
    assert main(["worker", "-A", "tests.apps.lifecycle", "--pool", "thread",
                 "--max-tasks-per-child", "5"]) == 2
    assert "the thread pool has none" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["worker", "-A", "tests.apps.lifecycle", "--max-memory-per-child", "0"])
    assert exited.value.code == 2
    assert "give a whole number from 1 to" in capsys.readouterr().err


def test_the_dashboard_counts_a_workers_recycled_children(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    now_ms = app.clock.now_ms()
    app.broker.registry.heartbeat("w1", {"pool": "process", "recycled": 12, "beat_ms": now_ms},
                                  now_ms, ttl_ms=60_000)
    assert [w["recycled"] for w in dashboard_workers(app)["workers"]] == [12]


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()])
def test_a_hook_raising_a_base_exception_is_logged_and_loses_no_task(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture,
        raised: BaseException) -> None:
    # Before: only Exception was caught, so SystemExit from a prerun hook ended the
    # pool's thread or child with the message leased (lost until its lease expired).
    app = make_app()
    ok, flaky, bad = each_outcome(app)

    def explode(*args: Any) -> None:
        raise raised

    for event in ("task_start", "task_prerun", "task_postrun", "task_success"):
        app.on(event, explode)
    handles = [ok.delay("v"), flaky.delay("w"), bad.delay("x")]
    with caplog.at_level(logging.ERROR, logger="minitask.hooks"):
        drain(app.worker())
    assert [h.status() for h in handles] == ["succeeded", "succeeded", "failed"]
    assert handles[0].get() == "v" and handles[1].get() == "w"
    assert sum(type(raised).__name__ in (r.exc_text or "") for r in caplog.records) == 14


def test_an_async_hook_raising_a_base_exception_is_logged_but_a_cancellation_is_not_eaten(
        caplog: pytest.LogCaptureFixture) -> None:
    hooks = Hooks()
    started = asyncio.Event()

    async def leaves(context: Any) -> None:
        raise SystemExit(4)

    async def waits(context: Any) -> None:
        started.set()
        await asyncio.sleep(60)

    async def scenario() -> None:
        hooks.add("task_prerun", leaves)
        with caplog.at_level(logging.ERROR, logger="minitask.hooks"):
            await hooks.acall("task_prerun", None)  # logged, not raised
            assert await hooks.ainit(None) is None
        hooks.add("task_postrun", waits)
        call = asyncio.ensure_future(hooks.acall("task_postrun", None))
        await started.wait()
        call.cancel()  # the pool stops the attempt: the hook's CancelledError goes on
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(scenario())
    assert sum("SystemExit" in (r.exc_text or "") for r in caplog.records) == 1
