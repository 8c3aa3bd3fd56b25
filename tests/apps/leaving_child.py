"""An app whose ``leave`` task makes its process pool child exit with code 0 between
tasks, once, while it holds prefetched tasks: fault injection at the moment a child's
outcome is recorded and before its next task starts (``Recycling.due``, asked then
when ``--max-tasks-per-child`` is set). The broker comes from MINITASK_BROKER_URL;
its lease is 2 s, so that what the child took comes back soon."""
from __future__ import annotations

import os
from typing import Any, Optional

from minitask import Minitask
from minitask.worker.pools import recycling

app = Minitask("leaving", visibility_timeout=2.0)

#: Set in the child that ran ``leave``: it exits once that task's outcome is recorded.
_LEAVING = [False]
#: The Redis key that lets only the first ``leave`` attempt make its child exit.
ONCE = "leaving:once"


@app.task(name="leave")
def leave() -> str:
    _LEAVING[0] = bool(app.broker.client.set(ONCE, os.getpid(), nx=True))
    return "left"


@app.task(name="double")
def double(x: int) -> int:
    return 2 * x


_due = recycling.Recycling.due


def _leave_between_tasks(self: Any, handled: int) -> Optional[str]:
    if _LEAVING[0]:
        os._exit(0)  # unannounced: no "recycle" said, nothing given back
    return _due(self, handled)


recycling.Recycling.due = _leave_between_tasks  # type: ignore[method-assign]
