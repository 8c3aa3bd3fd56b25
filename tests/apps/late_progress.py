"""A task that leaves a thread reporting progress once the task's outcome is
recorded; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import os
import threading
import time

import redis

from minitask import Minitask, current_task

app = Minitask("late_progress")

#: Longest the thread waits for the outcome.
DEADLINE = 60.0


@app.task(name="reports_late", retries=0)
def reports_late() -> str:
    context = current_task()
    assert context is not None

    def later() -> None:
        end = time.monotonic() + DEADLINE
        while app.handle(context.id).status() != "succeeded" and time.monotonic() < end:
            time.sleep(0.02)
        context.set_progress(99, 100, "after return")
        context.set_progress(100, 100, "after return again")
        client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
        client.rpush(f"late:{context.id}", "reported")
        client.close()

    threading.Thread(target=later, daemon=True).start()
    context.set_progress(1, 100, "start")
    return "done"
