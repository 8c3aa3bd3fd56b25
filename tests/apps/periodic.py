"""An app with periodic tasks for subprocess workers; the broker comes from
MINITASK_BROKER_URL.

``TEST_PERIODIC`` (JSON) lists the decorated schedules a worker writes as it
starts: ``[{"name": ..., "task": "beat" | "slow", "every": s, ...}]``, the other
keys being options of ``@app.periodic``. Runs leave markers in Redis under
``marks:run:<task name>``: ``task id|tick|start|end|pid|fired`` (times in Unix seconds;
``fired`` is when the worker fired the tick, the run's ``enqueued_at``).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict

import redis

from minitask import Minitask, current_task

app = Minitask("periodic", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


def _mark(started: float) -> None:
    context = current_task()
    assert context is not None and context.eta is not None
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.rpush(f"marks:run:{context.name}",
                     f"{context.id}|{context.eta.timestamp()}|{started}|{time.time()}|"
                     f"{os.getpid()}|{context.enqueued_at.timestamp()}")
    finally:
        client.close()


def beat() -> None:
    """Mark that this tick ran."""
    _mark(time.time())


def slow(seconds: float) -> None:
    """Run longer than the period, then mark the run with its start and end."""
    started = time.time()
    time.sleep(seconds)
    _mark(started)


FUNCTIONS: Dict[str, Callable[..., Any]] = {"beat": beat, "slow": slow}
#: The plain tasks, for schedules added at run time.
app.task(name="beat")(beat)
app.task(name="slow")(slow)

for _entry in json.loads(os.environ.get("TEST_PERIODIC", "[]")):
    _options = dict(_entry)
    _function = FUNCTIONS[_options.pop("task")]
    app.periodic(**_options)(_function)
