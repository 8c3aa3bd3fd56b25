"""An app whose queue keeps at most 50 dead letters (``dead_letters_max``), for the
crash test of a worker killed while its dead-letterings delete the oldest dead
letters (bury.lua: at most 100 a call). ``fails`` fails at once (no retry: dead),
``adds`` succeeds. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

#: The most dead letters the queue keeps.
DEAD_MAX = 50

app = Minitask("dead_trimming", dead_letters_max=DEAD_MAX, visibility_timeout=3.0)


@app.task(retries=0, name="fails")
def fails(n: int) -> None:
    time.sleep(0.002)  # a stream of dead-letterings, not one burst: a kill lands among them
    raise ValueError(f"call {n} fails")


@app.task(name="adds")
def adds(x: int, y: int) -> int:
    return x + y
