"""OpenTelemetry (minitask[otel]): the producer's span context travels in the
message and the worker's span for the attempt continues it; checked with the
SDK's in-memory exporter."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from minitask import Minitask
from tests.support.draining import drain

_exporter = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the global provider is set once only
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
    _exporter.clear()
    yield _exporter
    _exporter.clear()


def test_the_workers_span_continues_the_producers_trace(
        make_app: Callable[..., Minitask], spans: InMemorySpanExporter) -> None:
    app = make_app()
    inner: list[Any] = []

    @app.task(retries=0)
    def work(fail: bool) -> None:
        inner.append(trace.get_current_span().get_span_context())
        if fail:
            raise ValueError("no")

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("checkout") as producer:
        handle = work.delay(False)
        failing = work.delay(True)
    untraced = work.delay(False)
    drain(app.worker())
    runs = {span.attributes["messaging.message.id"]: span for span in spans.get_finished_spans()
            if span.name == f"minitask.run {work.name}"}
    parent = producer.get_span_context()
    for task_id in (handle.id, failing.id):
        span = runs[task_id]
        assert span.context.trace_id == parent.trace_id
        assert span.parent is not None and span.parent.span_id == parent.span_id
        assert span.kind == trace.SpanKind.CONSUMER
    assert runs[failing.id].status.status_code == trace.StatusCode.ERROR
    assert runs[failing.id].events[0].name == "exception"
    assert runs[handle.id].status.status_code == trace.StatusCode.UNSET
    assert runs[untraced.id].parent is None  # no span at enqueue: a trace of its own
    assert runs[untraced.id].context.trace_id != parent.trace_id
    # the task's own code runs inside the attempt's span
    assert inner[0].span_id == runs[handle.id].context.span_id


def test_without_an_active_span_the_message_carries_no_trace(
        make_app: Callable[..., Minitask], spans: InMemorySpanExporter) -> None:
    app = make_app()

    @app.task
    def work() -> None:
        pass

    handle = work.delay()
    body = app.broker.queues.message_body("default", handle.id)
    assert body is not None and b"traceparent" not in body


def test_long_baggage_does_not_cost_the_trace(
        make_app: Callable[..., Minitask], spans: InMemorySpanExporter) -> None:
    """Only the W3C trace headers travel: a long baggage entry (over what the worker
    accepts of a header) would have made the worker drop the whole context."""
    from opentelemetry import baggage, context

    app = make_app()

    @app.task
    def work() -> None:
        pass

    tracer = trace.get_tracer("test")
    token = context.attach(baggage.set_baggage("note", "x" * 600))
    try:
        with tracer.start_as_current_span("checkout") as producer:
            handle = work.delay()
    finally:
        context.detach(token)
    drain(app.worker())
    (run,) = [span for span in spans.get_finished_spans()
              if (span.attributes or {}).get("messaging.message.id") == handle.id]
    assert run.context.trace_id == producer.get_span_context().trace_id


def test_without_a_tracer_provider_only_a_traced_attempt_makes_a_span() -> None:
    """A fresh process (the global provider is set once): no span for an attempt with
    nothing to record or carry on; a producer's context is still carried on."""
    code = textwrap.dedent("""
        from opentelemetry import trace
        from minitask import tracing
        from minitask.wire.message import new_message
        parent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        plain = new_message("a", "t", [], {}, "q", 5, 0, None)
        traced = new_message("b", "t", [], {}, "q", 5, 0, None, trace={"traceparent": parent})
        with tracing.attempt_span(plain) as span:
            assert span.span is None
            assert not trace.get_current_span().get_span_context().is_valid
        with tracing.attempt_span(traced) as span:
            assert span.span is not None
            assert trace.get_current_span().get_span_context().trace_id == int("1" * 32, 16)
            assert tracing.current_context() == {"traceparent": parent}
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
