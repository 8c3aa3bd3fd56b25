"""Tasks that report progress below 0 (``set_progress(-5, -1)``), then a good value;
the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask, current_task

app = Minitask("negative_progress")


@app.task(name="reports")
def reports(current: float, total: float) -> str:
    context = current_task()
    assert context is not None
    for _ in range(50):  # a tight loop of them: one line, not fifty
        context.set_progress(current, total, "bad")
    context.set_progress(-1)
    context.set_progress(2, 4, "good")
    context.set_progress(5, 4, "past an estimate")  # a total below current: kept
    time.sleep(0.3)  # the progress writer writes it meanwhile
    return "fine"
