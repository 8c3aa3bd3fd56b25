"""Results are bounded like messages: a return value whose encoded result is over
the app's ``max_result_bytes`` fails its attempt (retried or dead by the task's
options); and a batch of outcomes Redis refuses as a whole (one over the server's
``proto-max-bulk-len``) is recorded one by one, so only the refused one waits."""
from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable, List, Tuple

import pytest

from minitask import ConfigurationError, Minitask, ResultTooLarge, TaskFailed
from minitask.stores.results import Ack
from minitask.wire.message import Outcome
from minitask.worker.leases import Holdings, Job
from minitask.worker.outcomes import Recorder
from tests.support.draining import drain


def test_a_result_over_max_result_bytes_fails_its_attempt_naming_task_and_size(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app(max_result_bytes=1000)

    @app.task(name="big")
    def big(n: int) -> str:
        return "x" * n

    small, large = big.delay(10), big.delay(5000)
    drain(app.worker())
    assert small.get(timeout=1) == "x" * 10
    assert large.status() == "failed"
    with pytest.raises(TaskFailed) as failed:
        large.get(timeout=1)
    assert failed.value.exc_type == "ResultTooLarge"
    assert "'big'" in failed.value.message and "max_result_bytes=1,000" in failed.value.message
    assert re.search(r"result is 5,\d{3} bytes, over", failed.value.message)  # its size
    [dead] = app.dead_letters()
    assert dead.task_id == large.id and "max_result_bytes" in dead.reason


def test_a_result_over_the_cap_is_retried_by_the_task_options(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(max_result_bytes=1000)
    calls: List[int] = []

    @app.task(name="grows", retries=1, retry_backoff=0)
    def grows() -> str:
        calls.append(1)
        return "x" * (5000 if len(calls) == 1 else 10)

    handle = grows.delay()
    drain(app.worker())
    clock.advance(1)
    drain(app.worker())
    assert handle.get(timeout=1) == "x" * 10 and len(calls) == 2


def test_max_result_bytes_defaults_to_max_message_bytes_and_is_checked() -> None:
    assert Minitask("a", broker="redis://127.0.0.1:1/0").max_result_bytes == 1_048_576
    assert Minitask("a", broker="redis://127.0.0.1:1/0",
                    max_message_bytes=5000).max_result_bytes == 5000
    assert issubclass(ResultTooLarge, ValueError)
    for bad in (0, -1, 1.5, "1mb", True):
        with pytest.raises(ConfigurationError, match="max_result_bytes"):
            Minitask("a", broker="redis://127.0.0.1:1/0", max_result_bytes=bad)


@pytest.mark.integration
def test_a_batch_redis_refuses_is_recorded_one_by_one(
        start_redis: Callable[..., Any]) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    app = Minitask("batch", broker=server.url, max_result_bytes=8_000_000)

    @app.task(name="echo")
    def echo(value: str) -> str:
        return value

    handles = [echo.delay(str(n)) for n in range(3)]
    fetched = app.broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                      lease_ms=600_000, count=3, max_deliveries=5)
    assert len(fetched.deliveries) == 3
    holdings = Holdings()
    acks: List[Tuple[Job, Ack]] = []
    for number, delivery in enumerate(fetched.deliveries):
        value = "x" * 1_200_000 if number == 1 else "small"  # over the server's 1 MiB
        outcome = Outcome("succeeded", int(time.time() * 1000), value=value, attempt=1)
        acks.append((Job("default", delivery), app.broker.results.prepare_ack(
            "default", delivery.task_id, outcome, 600_000, task_name="echo")))
    holdings.restore_acks(acks)
    recorder = Recorder(app, holdings, None, threading.Event(),  # type: ignore[arg-type]
                        lambda: None)
    recorder.flush(fetch=False)
    # the two others are recorded; the one Redis cannot take is dead, saying why
    assert holdings.take_acks() == []
    by_id = {handle.id: handle for handle in handles}
    for number in (0, 2):
        assert by_id[fetched.deliveries[number].task_id].get(timeout=1) == "small"
    with pytest.raises(TaskFailed) as failed:
        by_id[fetched.deliveries[1].task_id].get(timeout=1)
    assert failed.value.exc_type == "ResultTooLarge"
    assert "Redis refused its result of 1,2" in failed.value.message
    assert "invalid bulk length" in failed.value.message
    assert "proto-max-bulk-len" in failed.value.message
    # the connection Redis closed is not reused: the next command meets no reset
    assert app.broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                   lease_ms=1000, count=1, max_deliveries=5).deliveries == []


@pytest.mark.integration
def test_a_result_redis_cannot_take_is_dead_and_the_worker_goes_on(
        start_redis: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    app = Minitask("alone", broker=server.url, max_result_bytes=8_000_000)

    @app.task(name="big")
    def big(n: int) -> str:
        return "x" * n

    large, small = big.delay(1_200_000), big.delay(3)
    drain(app.worker())  # -c 1, outcomes recorded one by one: never held on the large one
    assert small.get(timeout=1) == "xxx"
    with pytest.raises(TaskFailed) as failed:
        large.get(timeout=1)
    assert failed.value.exc_type == "ResultTooLarge"
    assert "Redis refused its result" in failed.value.message
    assert "lost Redis" not in caplog.text and "Connection reset" not in caplog.text
