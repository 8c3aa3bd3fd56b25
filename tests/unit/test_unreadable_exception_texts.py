"""An exception whose text cannot be read (its ``__str__`` raises, a SystemExit too) is
recorded and logged by its type, saying its text could not be read; its ``__str__`` is
never called unguarded, even when it raises only the second time it is read. A
registered type's encode function raising a BaseException on a return value fails the
attempt like any error, retried by the task's options."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

from minitask import Minitask, tracing
from minitask.printable import UNREADABLE, error_text, error_trace
from minitask.tracing import AttemptSpan
from tests.support.clock import ManualClock
from tests.support.draining import drain

pytestmark = pytest.mark.app("texts")


class Unreadable(Exception):
    def __str__(self) -> str:
        raise SystemExit(3)


class ReadOnce(Exception):
    """Its text reads the first time only: then its __str__ raises KeyboardInterrupt."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __str__(self) -> str:
        self.reads += 1
        if self.reads > 1:
            raise KeyboardInterrupt("read again")
        return "readable once"


class Prying(Exception):
    """Formatting its traceback raises SystemExit: its __getattr__ (asked for
    ``__notes__``) raises it."""

    def __getattr__(self, name: str) -> Any:
        raise SystemExit(f"no {name}")


class Shy:
    """Its encode function raises KeyboardInterrupt."""


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as exc:
        return exc


def errors_of(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR
            and r.name.startswith("minitask")]


@pytest.mark.parametrize("inner", [SystemExit, KeyboardInterrupt, ValueError])
def test_the_text_and_traceback_of_an_unreadable_exception_name_its_type(inner: type) -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise inner("no")

    error = raised(Broken())
    assert error_text(error) == f"<{UNREADABLE}: its __str__ raised {inner.__name__}>"
    trace = error_trace(error)
    assert trace.startswith("Traceback (most recent call last):")
    assert "Broken" in trace.splitlines()[-1]
    assert error_text(raised(ValueError("plain"))) == "plain"


def test_an_exception_chained_to_an_unreadable_one_keeps_its_frames() -> None:
    try:
        try:
            raise Unreadable()
        except Unreadable as cause:
            raise RuntimeError("after it") from cause
    except RuntimeError as exc:
        error: BaseException = exc
    trace = error_trace(error)
    assert "raise RuntimeError" in trace
    assert trace.splitlines()[-1] == "RuntimeError: after it"


def test_a_dead_task_whose_error_cannot_be_read_is_logged_by_its_type(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(retries=0)
    def fails() -> None:
        raise Unreadable()

    handle = fails.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))
    [line] = errors_of(caplog)
    said = line.getMessage()
    assert handle.id in said and "fails" in said and "(undecodable)" not in said
    assert f"Unreadable: <{UNREADABLE}: its __str__ raised SystemExit>" in said
    # the traceback goes with it (printable.log_error), which reads its text guarded
    assert "Traceback (most recent call last)" in (line.exc_text or "")
    [dead] = app.dead_letters()
    assert (dead.exc_type, dead.reason) == ("Unreadable", "failed")
    assert dead.message == f"<{UNREADABLE}: its __str__ raised SystemExit>"


def test_an_error_whose_traceback_cannot_be_formatted_is_logged_with_its_frames(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(retries=0)
    def fails() -> None:
        raise Prying("prying")

    fails.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))
    [line] = errors_of(caplog)
    said = line.getMessage()
    assert "Prying: prying" in said
    trace = line.exc_text or ""
    assert "Traceback (most recent call last)" in trace and 'raise Prying("prying")' in trace
    [dead] = app.dead_letters()
    assert (dead.exc_type, dead.message) == ("Prying", "prying")
    assert dead.traceback.endswith("Prying: prying\n") and "in fails" in dead.traceback


def test_an_error_readable_once_only_is_logged_all_the_same(
        app: Minitask, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # no tracer provider (test_tracing sets the global one for good): a span's
    # record_exception would be the one read the error allows
    monkeypatch.setattr(tracing, "_provider_set", lambda trace: False)

    @app.task(retries=0)
    def fails() -> None:
        raise ReadOnce()

    fails.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))
    said = [line.getMessage() for line in errors_of(caplog)]
    assert any("ReadOnce: readable once" in line for line in said), said
    [dead] = app.dead_letters()
    assert (dead.exc_type, dead.message) == ("ReadOnce", "readable once")


def test_an_encode_function_raising_a_base_exception_fails_the_attempt_by_its_options(
        app: Minitask, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    def encode(value: Any) -> bytes:
        raise KeyboardInterrupt("from encode")

    app.register_type(Shy, 50, encode, lambda data: Shy())

    @app.task(retries=1, retry_backoff=0, retry_on=(BaseException,))
    def returns_shy() -> Any:
        return Shy()

    handle = returns_shy.delay()
    caplog.set_level(logging.WARNING)
    worker = app.worker(burst=True)
    drain(worker)
    clock.advance(1)
    drain(worker)
    assert handle.status() == "failed"
    [dead] = app.dead_letters()
    assert dead.exc_type == "KeyboardInterrupt" and dead.attempts == 2
    assert dead.reason == ("the return value cannot be encoded: KeyboardInterrupt raised "
                           "while encoding it; out of attempts")
    [retried] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                 and "failed on attempt 1" in r.getMessage()]
    assert "KeyboardInterrupt: from encode; the return value cannot be encoded" in retried


def test_an_attempts_span_says_an_unreadable_error_by_its_type() -> None:
    pytest.importorskip("opentelemetry.trace")

    class Span:
        status: Any = None

        def record_exception(self, error: BaseException) -> None:
            str(error)  # as OpenTelemetry's does: the app's __str__, unguarded

        def set_status(self, status: Any) -> None:
            self.status = status

    span = Span()
    AttemptSpan(span).failed(raised(Unreadable()))
    assert span.status.description == f"<{UNREADABLE}: its __str__ raised SystemExit>"


def test_a_producers_keyboard_interrupt_in_an_encode_function_reaches_the_caller(
        app: Minitask) -> None:
    def encode(value: Any) -> bytes:
        raise KeyboardInterrupt("Ctrl-C while sending")

    app.register_type(Shy, 51, encode, lambda data: Shy())

    @app.task
    def takes(value: Any) -> None:
        pass

    with pytest.raises(KeyboardInterrupt):
        takes.delay(Shy())
