"""Tasks that leave an alarm of their own armed in a process pool child (a repeating
``SIGALRM`` timer whose handler raises), and one that naps through where it would
ring; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Optional

from minitask import Minitask

app = Minitask("left_alarm")

#: Seconds between two rings of the alarm ``leaves_alarm`` leaves: many in a nap.
RING = 0.02


def _rings(signum: int, frame: Optional[FrameType]) -> None:
    raise RuntimeError("the alarm an earlier task left rang")


@app.task(name="leaves_alarm", retries=0)
def leaves_alarm() -> str:
    """Arms a repeating timer with a raising handler and returns, leaving both."""
    signal.signal(signal.SIGALRM, _rings)
    signal.setitimer(signal.ITIMER_REAL, RING, RING)
    return "armed"


@app.task(name="leaves_handler", retries=0)
def leaves_handler() -> str:
    """Sets a raising handler but arms nothing: nothing rings it."""
    signal.signal(signal.SIGALRM, _rings)
    return "set"


@app.task(name="naps", retries=0)
def naps(x: int) -> int:
    """Sleeps through several rings of a left alarm, were it still armed."""
    time.sleep(5 * RING)
    return x
