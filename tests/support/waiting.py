"""Waiting for something another process or thread does: always with a deadline."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def elapsed_since(start: float) -> float:
    """Seconds since ``start``, a ``time.monotonic()`` reading."""
    return time.monotonic() - start
