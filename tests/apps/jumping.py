"""tests.apps.basic served by a worker whose machine clock steps ``TEST_CLOCK_JUMP_S``
seconds while it serves (as an NTP step would), when it runs the task ``step_clock``:
its outcome and the next fetch then go out with the stepped clock, before any
heartbeat can see the step. ``time.time`` and ``time.time_ns`` are shifted; the
monotonic clock is not."""
from __future__ import annotations

import os
import time

from tests.apps.basic import app

_STEP = float(os.environ.get("TEST_CLOCK_JUMP_S", "0"))
_stepped = [0.0]
if _STEP:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _stepped[0]
    time.time_ns = lambda: _time_ns() + int(_stepped[0] * 1e9)


@app.task(name="step_clock")
def step_clock() -> int:
    """The machine's clock steps (only where TEST_CLOCK_JUMP_S is set)."""
    _stepped[0] = _STEP
    return os.getpid()


__all__ = ["app", "step_clock"]
