"""The tasks of ``minitask bench``'s main rows, and the app their worker processes
load with ``-A minitask.bench.tasks:app`` (named by ``APP_ENV``: a throwaway name,
so that user data is never touched)."""
from __future__ import annotations

import os
import time
from typing import Any, Dict

from ..app import Minitask
from ..context import current_task
from .scratch import BENCH

APP_ENV = "MINITASK_BENCH_APP"
#: Outcomes each queue's record keeps in the worker processes (``recent_outcomes``):
#: the drain is measured with the default record and with none.
RECENT_ENV = "MINITASK_BENCH_RECENT"

#: The app the main rows' worker processes load.
_options: Dict[str, Any] = {}
if RECENT_ENV in os.environ:
    _options["recent_outcomes"] = int(os.environ[RECENT_ENV])
app = Minitask(os.environ.get(APP_ENV, BENCH), **_options)


@app.task(ignore_result=True)
def noop(index: int) -> None:
    """The cheapest task there is: measures minitask, not the task."""


@app.task
def kept(index: int) -> int:
    """A no-op whose result is kept (for the result's day)."""
    return index


@app.task
def started_at(sent_at: float) -> float:
    """Seconds from ``sent_at`` (the producer's clock) to the start of this attempt."""
    return time.time() - sent_at


@app.task
def lateness() -> float:
    """Seconds between this attempt's start and its eta (negative would be early)."""
    context = current_task()
    assert context is not None and context.eta is not None
    return time.time() - context.eta.timestamp()
