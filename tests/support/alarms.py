"""What the tests that arm real ``SIGALRM`` timers in this process share: the timer
stopped and the handler put back after each, whatever the test left."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def sigalrm_restored() -> Iterator[None]:
    """Stop the real timer and put back the ``SIGALRM`` handler found on entry, on exit."""
    before = signal.getsignal(signal.SIGALRM)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
