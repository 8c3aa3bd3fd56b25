"""Logs that say what happened: retries at WARNING, every dead task at ERROR with its
traceback (encode errors and unknown tasks included), records from inside a task
carrying its id and name, and names close to an unknown task's suggested."""
from __future__ import annotations

import io
import json
import logging
from typing import Any, List

import pytest

from minitask import Minitask, Retry
from minitask.broker.keys import queue_keys
from minitask.cli.logs import TEXT_FORMAT, JsonFormatter, TaskContextFilter, handler
from minitask.worker.runner import close_names
from tests.support.clock import ManualClock
from tests.support.draining import drain

user_logger = logging.getLogger("shop.emails")


pytestmark = pytest.mark.app("logs")


def records(caplog: pytest.LogCaptureFixture, level: int) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and r.name.startswith("minitask")]


def test_a_retried_attempt_is_a_warning_and_not_an_error(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(retries=1, retry_backoff=0.01)
    def flaky() -> None:
        raise ConnectionError("mail server busy")

    handle = flaky.delay()
    caplog.set_level(logging.INFO)
    drain(app.worker(burst=True))

    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 1 and handle.id in warnings[0].getMessage()
    assert "mail server busy" in warnings[0].getMessage()
    assert records(caplog, logging.ERROR) == []
    assert handle.status() == "retrying"


@pytest.mark.parametrize("case", ["raises", "out of attempts", "unencodable value",
                                  "unknown task", "undecodable"])
def test_a_task_that_ends_dead_is_an_error_with_its_traceback_whatever_the_reason(
        app: Minitask, clock: ManualClock, caplog: pytest.LogCaptureFixture,
        case: str) -> None:
    @app.task
    def explode() -> None:
        raise ValueError("bad address")

    @app.task(retries=1, retry_backoff=0.01)
    def keeps_failing() -> None:
        raise OSError("still down")

    @app.task
    def returns_a_set() -> Any:
        return {1, 2}

    if case == "raises":
        task_id = explode.delay().id
    elif case == "out of attempts":
        task_id = keeps_failing.delay().id
    elif case == "unencodable value":
        task_id = returns_a_set.delay().id
    elif case == "unknown task":
        producer = Minitask("logs", broker=app.broker.client, clock=clock)
        task_id = producer.task(name="nobody.knows")(lambda: None).delay().id
    else:
        task_id = explode.delay().id
        app.broker.client.hset(app.broker.queues.keys("default").messages, task_id, b"\xc1junk")
    caplog.set_level(logging.WARNING)  # what --loglevel WARNING keeps

    worker = app.worker(burst=True)
    drain(worker)
    clock.advance(1)
    drain(worker)

    errors = records(caplog, logging.ERROR)
    assert len(errors) == 1, [r.getMessage() for r in caplog.records]
    assert task_id in errors[0].getMessage()
    # the traceback goes with the record, formatted and bounded (printable.log_error)
    assert errors[0].exc_text, "the traceback goes with the record"
    assert app.handle(task_id).status() == "failed"
    assert [d.task_id for d in app.dead_letters()] == [task_id]


def test_an_unencodable_return_value_names_the_problem(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task
    def returns_a_set() -> Any:
        return {1, 2}

    returns_a_set.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))

    (error,) = records(caplog, logging.ERROR)
    assert "the return value cannot be encoded" in error.getMessage()
    assert "EncodeError" in error.getMessage()


def test_an_ignore_result_task_succeeds_whatever_it_returns(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    """Its value is kept nowhere, so it is never encoded: a value msgpack cannot carry
    does not make it fail."""
    @app.task(ignore_result=True)
    def returns_a_set() -> Any:
        return {1, 2}

    handle = returns_a_set.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))

    assert records(caplog, logging.ERROR) == []
    assert app.dead_letters() == []
    assert app.broker.client.exists(queue_keys(app.name, "default").result(handle.id)) == 0


def test_an_unknown_task_suggests_the_registered_name_one_import_path_away(
        app: Minitask, clock: ManualClock) -> None:
    @app.task(name="pkg.jobs.mul")
    def mul(x: int, y: int) -> int:
        return x * y

    producer = Minitask("logs", broker=app.broker.client, clock=clock)
    handle = producer.task(name="jobs.mul")(lambda x, y: None).delay(2, 3)
    drain(app.worker(burst=True))

    (dead,) = app.dead_letters()
    assert dead.task_id == handle.id and dead.exc_type == "UnknownTaskError"
    assert "did you mean 'pkg.jobs.mul'?" in dead.message


def test_close_names_puts_a_longer_import_path_first_then_similar_names() -> None:
    known = ["pkg.jobs.mul", "pkg.jobs.add", "emails.receipt", "jobs.mux"]
    assert close_names("jobs.mul", known)[:2] == ["pkg.jobs.mul", "jobs.mux"]
    assert close_names("emails.recipt", known) == ["emails.receipt"]
    assert close_names("zzz", known) == []


def capture(log_format: str) -> "tuple[logging.Handler, io.StringIO]":
    stream = io.StringIO()
    found = handler(log_format)
    found.setStream(stream)  # type: ignore[attr-defined]
    return found, stream


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_records_logged_inside_a_task_carry_its_id_and_name(
        app: Minitask, log_format: str) -> None:
    @app.task(name="emails.send")
    def send(to: str) -> None:
        user_logger.warning("sending to %s", to)

    attached, stream = capture(log_format)
    user_logger.addHandler(attached)
    try:
        handle = send.delay("ann@example.com")
        drain(app.worker(burst=True))
        user_logger.warning("outside any task")
    finally:
        user_logger.removeHandler(attached)

    inside, outside = stream.getvalue().splitlines()
    if log_format == "json":
        entry, other = json.loads(inside), json.loads(outside)
        assert (entry["task_id"], entry["task_name"]) == (handle.id, "emails.send")
        assert entry["message"] == "sending to ann@example.com"
        assert entry["level"] == "WARNING" and entry["logger"] == "shop.emails"
        assert (other["task_id"], other["task_name"]) == ("", "")
    else:
        assert f"[emails.send {handle.id}] sending to ann@example.com" in inside
        assert outside.endswith("shop.emails: outside any task")


def test_json_lines_carry_the_traceback_and_extra_fields() -> None:
    record = logging.LogRecord("minitask.worker", logging.ERROR, __file__, 1, "task %s is dead",
                               ("abc",), None)
    try:
        raise ValueError("bad address")
    except ValueError as exc:
        record.exc_info = (ValueError, exc, exc.__traceback__)
    record.order_id = 1001
    TaskContextFilter().filter(record)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "task abc is dead"
    assert "ValueError: bad address" in entry["traceback"]
    assert entry["order_id"] == 1001 and entry["task_id"] == ""


def test_the_text_format_names_the_task_only_inside_one() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", (), None)
    TaskContextFilter().filter(record)
    assert logging.Formatter(TEXT_FORMAT).format(record).endswith("x: hello")


def test_retry_raised_by_the_task_is_a_warning(app: Minitask,
                                               caplog: pytest.LogCaptureFixture) -> None:
    @app.task(retries=2)
    def patient() -> None:
        raise Retry(delay=5)

    patient.delay()
    caplog.set_level(logging.INFO)
    drain(app.worker(burst=True))
    assert len(records(caplog, logging.WARNING)) == 1
    assert records(caplog, logging.ERROR) == []
