"""The attempt span's check for a tracer provider (every attempt makes it): without
one set, it costs no lookup through ``os.environ``, and a provider named by
OTEL_PYTHON_TRACER_PROVIDER is still loaded and used."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_without_a_provider_the_check_looks_nothing_up_in_os_environ() -> None:
    """A fresh process (the global provider is set once): get_tracer_provider() would
    look its variable up in os.environ at every attempt (a KeyError raised and caught
    inside), some 2 us of a worker's time per task."""
    code = textwrap.dedent("""
        import os
        from minitask import tracing
        from minitask.wire.message import new_message
        tracing._otel()  # imported before: the modules read variables as they load
        looked = []
        original = type(os.environ).__getitem__
        def counted(self, key):
            looked.append(key)
            return original(self, key)
        type(os.environ).__getitem__ = counted
        plain = new_message("a", "t", [], {}, "q", 5, 0, None)
        for _ in range(3):
            with tracing.attempt_span(plain) as span:
                assert span.span is None
        type(os.environ).__getitem__ = original
        print(sorted(set(looked)))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items()
                                            if k != "OTEL_PYTHON_TRACER_PROVIDER"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_provider_named_in_the_environment_is_loaded_for_an_untraced_attempt() -> None:
    code = textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from minitask import tracing
        from minitask.wire.message import new_message
        plain = new_message("a", "t", [], {}, "q", 5, 0, None)
        with tracing.attempt_span(plain) as span:
            assert span.span is not None
            assert trace.get_current_span().get_span_context().is_valid
        assert isinstance(trace.get_tracer_provider(), TracerProvider)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ,
                                                OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider"))
    assert done.stdout.strip() == "ok", done.stderr
