"""An app whose tasks nap without touching Redis, so that a test can fill Redis while
they run and see their outcomes refused, not the tasks' own writes. The broker comes
from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("fullredis")


@app.task(name="nap")
def nap(n: int, seconds: float) -> int:
    time.sleep(seconds)
    return n
