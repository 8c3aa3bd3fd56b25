"""tests.apps.broadcast served by a worker whose clock runs ``TEST_CLOCK_AHEAD_S``
seconds ahead of the machine's (as tests.apps.skewed shifts it, before the worker reads
any time)."""
from __future__ import annotations

import os
import time

_AHEAD = float(os.environ.get("TEST_CLOCK_AHEAD_S", "0"))
if _AHEAD:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _AHEAD
    time.time_ns = lambda: _time_ns() + int(_AHEAD * 1e9)

from tests.apps.broadcast import app  # noqa: E402  (the clock shifted first)

__all__ = ["app"]
