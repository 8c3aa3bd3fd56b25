"""Hooks, metrics counted with the heartbeat, progress, and the message's trace
field (guide/observability), on fakeredis; the dashboard is in test_dashboard.py."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, List, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

from minitask import ConfigurationError, Minitask, Progress, current_task
from minitask.dashboard.metrics import exposition
from minitask.wire.message import Message
from minitask.wire.serializer import decode_message, encode_message
from minitask.worker import progress as progress_module
from tests.support.draining import drain
from tests.support.outcomes import each_outcome


def test_hooks_hear_each_event_with_the_task_context(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ok, flaky, bad = each_outcome(app)
    heard: List[Tuple[str, str, int, Any]] = []

    def listen(event: str) -> None:
        app.on(event, lambda context, *rest: heard.append(
            (event, context.name, context.attempt,
             rest[0] if event == "task_success" else type(rest[0]).__name__ if rest else None)))

    for event in ("task_start", "task_success", "task_retry", "task_failure", "task_dead"):
        listen(event)
    ok.delay(1)
    drain(app.worker())
    flaky.delay(2)
    drain(app.worker())
    bad.delay(3)
    drain(app.worker())
    assert heard == [
        ("task_start", ok.name, 1, None), ("task_success", ok.name, 1, 1),
        ("task_start", flaky.name, 1, None), ("task_failure", flaky.name, 1, "Retry"),
        ("task_retry", flaky.name, 1, "Retry"),
        ("task_start", flaky.name, 2, None), ("task_success", flaky.name, 2, 2),
        ("task_start", bad.name, 1, None), ("task_failure", bad.name, 1, "ValueError"),
        ("task_dead", bad.name, 1, "ValueError"),
    ]


def test_a_raising_hook_is_logged_and_never_changes_the_outcome(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    ok, flaky, bad = each_outcome(app)

    def explode(*args: Any) -> None:
        raise RuntimeError("hook bug")

    for event in ("task_start", "task_success", "task_retry", "task_failure", "task_dead"):
        app.on(event, explode)
    handles = [ok.delay("v"), flaky.delay("w"), bad.delay("x")]
    with caplog.at_level(logging.ERROR, logger="minitask.hooks"):
        drain(app.worker())
    assert [h.status() for h in handles] == ["succeeded", "succeeded", "failed"]
    assert handles[0].get() == "v" and handles[1].get() == "w"
    assert [d.task_id for d in app.dead_letters()] == [handles[2].id]
    assert sum("hook bug" in (r.exc_text or "") for r in caplog.records) == 10


def test_an_unknown_hook_event_is_refused(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    with pytest.raises(ConfigurationError, match="task_succes.*the events are"):
        app.on("task_succes", print)
    with pytest.raises(ConfigurationError, match="must be callable"):
        app.on("task_start", "not callable")  # type: ignore[arg-type]


def _samples(app: Minitask) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(exposition(app).decode()):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_metrics_reach_redis_with_the_heartbeat_not_per_task(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ok, flaky, bad = each_outcome(app)
    ok.delay_many([(i,) for i in range(3)])
    flaky.delay(1)
    bad.delay(1)
    worker = app.worker()
    drain(worker)
    assert app.broker.metrics.totals() == {}  # nothing written per task
    worker.beat()
    samples = _samples(app)

    def total(task: Any, outcome: str) -> float:
        return samples["minitask_tasks_total", (("outcome", outcome), ("queue", "default"),
                                                ("task", task.name))]

    assert [total(ok, o) for o in ("succeeded", "failed", "retried", "dead")] == [3, 0, 0, 0]
    assert [total(flaky, o) for o in ("succeeded", "failed", "retried", "dead")] == [1, 1, 1, 0]
    assert [total(bad, o) for o in ("succeeded", "failed", "retried", "dead")] == [0, 1, 0, 1]
    assert samples["minitask_task_duration_seconds_count", (("task", ok.name),)] == 3
    assert samples["minitask_task_duration_seconds_count", (("task", flaky.name),)] == 2
    assert samples["minitask_pickup_latency_seconds_count", (("queue", "default"),)] == 6
    assert samples["minitask_queue_tasks", (("queue", "default"), ("state", "dead"))] == 1
    assert samples["minitask_queue_tasks", (("queue", "default"), ("state", "ready"))] == 0
    worker.beat()  # nothing new: nothing added twice
    assert _samples(app) == samples


def test_metrics_counted_while_redis_fails_are_added_later(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch,
        clock: Any) -> None:
    from minitask.errors import BrokerError
    app = make_app()
    ok, _, _ = each_outcome(app)
    ok.delay(1)
    worker = app.worker()
    drain(worker)
    store = app.broker.metrics
    real_add = store.add

    def failing(delta: Any) -> None:
        raise BrokerError("down")

    monkeypatch.setattr(store, "add", failing)
    worker.beat()  # leases and the registry go on; the counts wait
    assert [w["name"] for w in app.broker.registry.live(clock.now_ms(), 60_000)] == [
        worker.name]
    monkeypatch.setattr(store, "add", real_add)
    ok.delay(2)
    drain(worker)
    worker.beat()
    assert store.totals()[("tasks", "default", ok.name, "succeeded")] == 2


def test_throughput_counts_attempts_per_minute_and_queue(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    ok, _, _ = each_outcome(app)
    ok.delay_many([(i,) for i in range(4)])
    worker = app.worker()
    drain(worker)
    clock.advance(60)
    ok.delay(5)
    drain(worker)
    worker.beat()
    series = app.broker.metrics.throughput(clock.now_ms(), 60)
    assert len(series) == 60
    assert [counts.get("default", 0) for _, counts in series[-2:]] == [4, 1]


def test_progress_is_read_back_after_the_task_and_expires_with_the_result(
        make_app: Callable[..., Minitask], fake_redis: Any) -> None:
    app = make_app()

    @app.task(result_ttl=120)
    def count(n: int) -> int:
        context = current_task()
        assert context is not None
        for i in range(1, n + 1):
            context.set_progress(i, n, f"step {i}")
        return n

    handle = count.delay(1000)
    assert handle.progress() is None
    drain(app.worker())
    progress = handle.progress()
    assert isinstance(progress, Progress)
    assert (progress.current, progress.total, progress.message) == (1000, 1000, "step 1000")
    assert progress.at.tzinfo is not None
    key = app.broker.progress.key("default", handle.id)
    client = app.broker.client
    assert 0 < client.pttl(key) <= 120_000


def test_progress_written_long_before_the_end_still_expires_with_the_result(
        make_app: Callable[..., Minitask]) -> None:
    """A value written early in a long attempt gets its full time to live again when the
    attempt ends: the task here shortens it to stand for the hours it ran on."""
    app = make_app()
    client = app.broker.client

    @app.task(result_ttl=120)
    def long_run() -> None:
        context = current_task()
        assert context is not None
        context.set_progress(1, 2, "early")
        key = app.broker.progress.key("default", context.id)
        deadline = time.monotonic() + 10
        while not client.exists(key):  # the writer thread writes it within 0.1 s
            assert time.monotonic() < deadline, "the progress was never written"
            time.sleep(0.01)
        client.pexpire(key, 2_000)  # as if written 118 s ago

    handle = long_run.delay()
    drain(app.worker())
    assert handle.status() == "succeeded"
    progress = handle.progress()
    assert progress is not None and progress.message == "early"
    assert 2_000 < client.pttl(app.broker.progress.key("default", handle.id)) <= 120_000


def test_inspect_shows_the_progress_of_a_task(make_app: Callable[..., Minitask]) -> None:
    from minitask.admin import inspect
    from minitask.cli.inspect import describe
    app = make_app()

    @app.task
    def count(n: int) -> int:
        context = current_task()
        assert context is not None
        context.set_progress(n // 2, n, "halfway")
        return n

    handle = count.delay(10)
    info = inspect(app, handle.id)
    assert info is not None and info.progress is None
    assert not [line for line in describe(info) if line.startswith("progress")]
    drain(app.worker())
    info = inspect(app, handle.id)
    assert info is not None and info.progress is not None
    (line,) = [line for line in describe(info) if line.startswith("progress")]
    assert line.startswith("progress     5 / 10  halfway  (at ")
    shown = info.as_dict()["progress"]
    assert (shown["current"], shown["total"], shown["message"]) == (5, 10, "halfway")


def test_set_progress_refuses_what_is_not_a_number(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    errors: List[str] = []

    @app.task
    def report(current: Any, total: Any, message: Any) -> None:
        context = current_task()
        assert context is not None
        try:
            context.set_progress(current, total, message)
        except ConfigurationError as exc:
            errors.append(str(exc))

    # (a float that is not finite is ignored with a warning, not raised:
    # tests/unit/test_progress_not_finite_ignored.py)
    for call in (("1", None, None), (1, True, None), (1, 2, 3)):
        report.delay(*call)
    drain(app.worker())
    assert len(errors) == 3 and all("set_progress" in e for e in errors)


def test_a_plain_message_keeps_its_bytes_and_a_trace_context_round_trips() -> None:
    plain = Message("id1", "t", [1], {}, "default", 5, 1_000)
    traced = Message("id1", "t", [1], {}, "default", 5, 1_000,
                     trace={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-"
                                           "b7ad6b7169203331-01"})
    assert b"tc" not in encode_message(plain)
    assert decode_message(encode_message(plain)) == plain
    assert decode_message(encode_message(traced)) == traced


def test_a_malformed_trace_context_is_dropped_not_fatal() -> None:
    from minitask.wire.serializer import _pack  # a producer in another language wrote it
    fields = {"v": 1, "id": "id1", "task": "t", "args": [], "kwargs": {}, "queue": "q",
              "priority": 5, "enqueued_at_ms": 1, "eta_ms": None, "attempt": 1}
    for bad in ({"traceparent": 1}, "text", {"k" * 600: "v"}, {}):
        message = decode_message(_pack({**fields, "tc": bad}))
        assert message.trace is None and message.task == "t"


def test_hooks_hear_of_an_attempt_the_process_pool_killed_at_its_time_limit(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    heard: List[Tuple[str, str, str]] = []
    for event in ("task_failure", "task_dead"):
        app.on(event, lambda context, error, event=event: heard.append(
            (event, context.name, type(error).__name__)))

    @app.task(timeout=1, retries=0)
    def hangs() -> None:
        pass

    handle = hangs.delay()
    worker = app.worker()
    job = worker.fetch()
    assert job is not None
    worker.timed_out(job, job.delivery.message(), 1.5)  # what the supervisor does
    assert handle.status() == "failed"
    assert heard == [("task_failure", hangs.name, "TimeLimitExceeded"),
                     ("task_dead", hangs.name, "TimeLimitExceeded")]


def test_a_task_dead_lettered_for_killing_its_workers_is_counted_and_heard(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(visibility_timeout=5.0, max_deliveries=1)
    heard: List[Tuple[str, str, int]] = []
    app.on("task_dead", lambda context, error: heard.append(
        (context.name, str(error), context.delivery)))

    @app.task
    def crashes() -> None:
        pass

    handle = crashes.delay()
    assert app.worker().fetch() is not None  # leased, then its worker "died"
    clock.advance(6)
    worker = app.worker()
    drain(worker)  # its fetch dead-letters the task
    assert handle.status() == "failed"
    assert heard == [(crashes.name, "the worker died while running it 1 times "
                                    "(max_deliveries=1), or Redis refused to record "
                                    "its outcome (the workers' logs say which)", 1)]
    worker.beat()
    assert app.broker.metrics.totals()[("tasks", "default", crashes.name, "dead")] == 1


def test_a_task_no_worker_knows_is_counted_dead_and_heard(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    heard: List[Tuple[str, str]] = []
    app.on("task_dead", lambda context, error: heard.append(
        (context.name, type(error).__name__)))
    producer = make_app()
    producer.task(name="jobs.gone")(lambda: None).delay()
    worker = app.worker()
    drain(worker)
    worker.beat()
    assert heard == [("jobs.gone", "UnknownTaskError")]
    # one label for every unknown name (the message's own text): series stay bounded
    assert app.broker.metrics.totals()[("tasks", "default", "(unknown task)", "dead")] == 1


def test_the_progress_writer_thread_ends_when_idle_and_starts_again(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that are gone leave no writer threads behind (drain() makes many)."""
    monkeypatch.setattr(progress_module, "IDLE_END", 0.05)
    app = make_app()

    @app.task
    def step(n: int) -> int:
        context = current_task()
        assert context is not None
        context.set_progress(n)
        return n

    def writers() -> int:
        return sum(1 for thread in threading.enumerate() if thread.name == "minitask-progress")

    before = writers()
    for n in range(5):
        handle = step.delay(n)
        drain(app.worker())
        reported = handle.progress()
        assert reported is not None and reported.current == n
    deadline = time.monotonic() + 10
    while writers() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writers() <= before, "idle progress writer threads were left running"
