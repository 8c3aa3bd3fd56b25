"""An app for a worker whose broker URL gives its Redis client a tiny connection pool
(``?max_connections=...&timeout=...``): its tasks nap, holding the worker's slots while
its other threads need connections. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("squeeze")


@app.task(name="nap")
def nap(x: int) -> int:
    time.sleep(0.05)
    return x
