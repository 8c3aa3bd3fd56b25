"""Imported first by the apps of a worker whose clock runs ``TEST_CLOCK_AHEAD_S``
seconds ahead of the machine's, and so of Redis's (tests.apps.skewed,
tests.apps.skewed_broadcast): ``time.time`` and ``time.time_ns`` are shifted as this
module is imported, before the worker reads any time (minitask reads them through the
``time`` module at each call, as the logging does). No app of its own."""
from __future__ import annotations

import os
import time

_AHEAD = float(os.environ.get("TEST_CLOCK_AHEAD_S", "0"))
if _AHEAD:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _AHEAD
    time.time_ns = lambda: _time_ns() + int(_AHEAD * 1e9)
