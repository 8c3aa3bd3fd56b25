"""An app whose schedule ``moving`` is moved from queue ``old`` to queue ``new``; the
broker comes from MINITASK_BROKER_URL. Its task records each run in Redis (``runs``:
"queue id"). Run as a program (``python -m tests.apps.moving_schedule``), it is a
producer moving the schedule that stops between the save in the new queue and the
removal from the old one: it prints "saved" and blocks there, for a test to SIGKILL."""
from __future__ import annotations

import os
import time
from typing import Any

import redis

from minitask import Minitask, current_task

app = Minitask("moving")

#: The schedule's period (s).
EVERY = 1.0


@app.task(name="tick", queue="old")
def tick() -> None:
    context = current_task()
    assert context is not None
    with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
        client.rpush("runs", f"{context.queue} {context.id}")


def _stalled(queue: str, name: str, *marked: Any) -> bool:
    print("saved", flush=True)  # in the new queue; the old one still holds it
    time.sleep(3600)
    return False


if __name__ == "__main__":
    app.broker.schedules.remove = _stalled  # type: ignore[method-assign]
    app.add_schedule("moving", tick, every=EVERY, queue="new")
