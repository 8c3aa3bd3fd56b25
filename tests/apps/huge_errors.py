"""An app whose tasks raise an exception with a 5 MB message, as a plain function and
as ``async def``, and whose ``task_failure`` hook raises one too; the broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import Any

from minitask import Minitask

app = Minitask("huge")

#: The length of each message raised here.
HUGE = 5_000_000


@app.task(retries=0, name="plain_huge")
def plain_huge() -> None:
    raise ValueError("p" * HUGE)


@app.task(retries=0, name="async_huge")
async def async_huge() -> None:
    raise ValueError("a" * HUGE)


def failure_hook(*args: Any) -> None:
    raise RuntimeError("h" * HUGE)


app.on("task_failure", failure_hook)
