"""An app that keeps at most five dead letters a queue (``dead_letters_max``); its
one task fails, each call a few milliseconds apart, so that each dead letter is
dated after the one before. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("dead_capped", dead_letters_max=5)


@app.task(retries=0, name="fails")
def fails(n: int) -> None:
    time.sleep(0.005)  # the dead letters' times (ms) differ: "the newest" is one order
    raise ValueError(f"call {n} fails")
