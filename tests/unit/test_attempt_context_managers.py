"""The context managers a worker enters for every attempt keep their promises as
plain classes: the task context is reset whatever the block raised, an attempt
with no span lets the task's error through, and the transport's error wrapper
turns redis-py's errors (and only those) into a BrokerError saying what failed.

They were generator context managers (``@contextmanager``) until a process pool
child's profile showed five of them per task costing several calls each.
"""
from __future__ import annotations

import fakeredis
import pytest
import redis

from minitask import BrokerError, current_task
from minitask.broker.transport import Transport
from minitask.context import entered, running
from minitask import tracing
from minitask.tracing import attempt_span
from minitask.wire.message import Message


def _message() -> Message:
    return Message(id="t1", task="jobs.add", args=[1], kwargs={}, queue="default",
                   priority=0, enqueued_at_ms=1_700_000_000_000)


def test_the_task_context_is_current_in_the_block_and_reset_after_an_error() -> None:
    with pytest.raises(ValueError):
        with running(_message(), delivery=2) as context:
            assert current_task() is context
            assert (context.id, context.delivery) == ("t1", 2)
            with entered(context) as again:  # what the task_postrun hooks see
                assert again is context and current_task() is context
            assert current_task() is context  # the inner reset restored the outer
            raise ValueError("the task failed")
    assert current_task() is None


def test_an_attempt_without_a_span_lets_the_task_error_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # as if no tracer provider were set: test_tracing sets the global one, for good
    monkeypatch.setattr(tracing, "_provider_set", lambda trace: False)
    plain = _message()  # no trace context: no span (whether otel is installed or not)
    with pytest.raises(KeyError):
        with attempt_span(plain) as span:
            raise KeyError("inside the task")
    assert attempt_span(plain) is attempt_span(plain)  # one shared no-op, no allocation
    assert span.span is None


def test_a_redis_error_becomes_a_broker_error_naming_what_failed() -> None:
    transport = Transport(fakeredis.FakeRedis(), "redis://h:6379/0")
    original = redis.ConnectionError("Connection refused")
    with pytest.raises(BrokerError) as raised:
        with transport.errors("fetch from queue 'q'", "fetch"):
            raise original
    assert str(raised.value).startswith(
        "could not fetch from queue 'q' (broker redis://h:6379/0): Connection refused")
    assert raised.value.__cause__ is original
    with pytest.raises(BrokerError) as reset:  # a socket's own error too
        with transport.errors("ack"):
            raise ConnectionResetError(104, "reset by peer")
    assert isinstance(reset.value.__cause__, ConnectionResetError)


def test_other_errors_and_broker_errors_pass_through_unchanged() -> None:
    transport = Transport(fakeredis.FakeRedis(), "redis://h:6379/0")
    already = BrokerError("could not do the inner thing")
    with pytest.raises(BrokerError) as raised:
        with transport.errors("outer"):
            raise already
    assert raised.value is already
    with pytest.raises(ValueError):
        with transport.errors("outer"):
            raise ValueError("not Redis's")
    with transport.errors("nothing wrong"):
        pass
