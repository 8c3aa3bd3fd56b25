"""An app for a chain whose first step's worker is SIGKILLed after it sent the next
step and before its ack (at least once: that step runs again). CRASH_FLAG: a file made
at the crash (one crash in all); HELD_FLAG: a file held_add waits for (at most 60 s).
The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from minitask import Minitask
from minitask.stores import workflows

app = Minitask("crashchain", visibility_timeout=2)


@app.task(name="add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="quiet_add", ignore_result=True)
def quiet_add(x: int, y: int) -> int:
    return x + y


@app.task(name="held_add")
def held_add(x: int, y: int) -> int:
    """Runs until the test lets it end (HELD_FLAG made): still running meanwhile."""
    deadline = time.monotonic() + 60
    while not Path(os.environ["HELD_FLAG"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return x + y


_advance = workflows.WorkflowStore.advance


def _advance_then_crash(self: Any, frame: Any, value: Any, now_ms: int) -> None:
    _advance(self, frame, value, now_ms)
    flag = os.environ.get("CRASH_FLAG")
    if flag and not os.path.exists(flag):
        Path(flag).touch()
        os.kill(os.getpid(), signal.SIGKILL)  # what follows sent, the step never acked


workflows.WorkflowStore.advance = _advance_then_crash  # type: ignore[method-assign]
