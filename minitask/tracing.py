"""OpenTelemetry, when ``minitask[otel]`` is installed: a producer's trace
context goes into the message, and the worker's span for the attempt
continues it. Without the package every function here is a cheap no-op.
"""
from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from typing import Any, ContextManager, Dict, Iterator, Optional

from .printable import error_text
from .wire.message import Message

_api: Any = None
_looked = False


def _otel() -> Any:
    """The ``opentelemetry`` modules, or None when not installed (looked up once)."""
    global _api, _looked
    if not _looked:
        _looked = True
        try:
            _api = (importlib.import_module("opentelemetry.trace"),
                    importlib.import_module("opentelemetry.propagate"))
        except ImportError:
            _api = None
    return _api


#: The W3C trace context headers a message carries.
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})


def current_context() -> Optional[Dict[str, str]]:
    """The active span's context as message headers, or None (no span, no otel)."""
    api = _otel()
    if api is None or not api[0].get_current_span().get_span_context().is_valid:
        return None  # no span: nothing to continue, and the usual enqueue pays no more
    carrier: Dict[str, str] = {}
    api[1].inject(carrier)
    # the trace itself only: baggage may be long, and the worker drops a context with
    # an entry too long to be a trace's (serializer._trace)
    kept = {key: value for key, value in carrier.items() if key in TRACE_HEADERS}
    return kept or None


class AttemptSpan:
    """The worker's span of one attempt (or nothing, without otel)."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def failed(self, error: BaseException) -> None:
        if self.span is not None:
            trace = _otel()[0]
            try:  # it reads the error's text: the app's __str__, which may raise anything
                self.span.record_exception(error)
            except BaseException:  # the status below still says what failed
                pass
            self.span.set_status(trace.Status(trace.StatusCode.ERROR, error_text(error)))


#: The variable that names a tracer provider for ``get_tracer_provider`` to load.
_PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"


def _provider_set(trace: Any) -> bool:
    """Whether a tracer provider (an SDK's) has been set: until then a span records
    nothing, and one with no producer's context to carry on is pure cost (about 25 us
    an attempt here, where the API is often installed by another package).

    While none is set, ``get_tracer_provider`` looks its variable up in ``os.environ``
    on every call (a KeyError raised and caught: some 2 us an attempt); the API's
    global is read first, and the environment only through its dict of bytes."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and _PROVIDER_KEY not in _ENVIRON:
        return False  # none set, none named: the API's proxy
    return not isinstance(trace.get_tracer_provider(),
                          (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


_UNKNOWN = object()
# os.environ's own dict (keys as bytes on POSIX), or os.environ where it has none
_ENVIRON: Any = getattr(os.environ, "_data", os.environ)
_PROVIDER_KEY: Any = (os.environ.encodekey(_PROVIDER_VARIABLE)
                      if _ENVIRON is not os.environ else _PROVIDER_VARIABLE)


class _NoSpan:
    """The span of an attempt that has none: entered and left at no cost."""

    span = AttemptSpan(None)

    def __enter__(self) -> AttemptSpan:
        return self.span

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


def attempt_span(message: Message) -> ContextManager[AttemptSpan]:
    """The current span while the attempt runs: a child of the producer's span, if
    the message carries one. Without a provider set, only a message's own trace
    context makes one (so that calls made by the task carry it on)."""
    api = _api if _looked else _otel()  # (at every attempt: no call once looked up)
    if api is None or not (message.trace or (  # (none set nor named: ``_provider_set``
            getattr(api[0], "_TRACER_PROVIDER", _UNKNOWN) is not None  # inline, no call)
            or _PROVIDER_KEY in _ENVIRON) and _provider_set(api[0])):
        return _NO_SPAN
    return _span(api, message)


@contextmanager
def _span(api: Any, message: Message) -> Iterator[AttemptSpan]:
    trace, propagate = api
    parent = propagate.extract(message.trace or {})
    tracer = trace.get_tracer("minitask")
    with tracer.start_as_current_span(
            f"minitask.run {message.task}", context=parent, kind=trace.SpanKind.CONSUMER,
            record_exception=False, set_status_on_exception=False,
            attributes={"messaging.system": "minitask", "messaging.destination.name":
                        message.queue, "messaging.message.id": message.id,
                        "minitask.task": message.task, "minitask.attempt": message.attempt}
    ) as span:
        yield AttemptSpan(span)
