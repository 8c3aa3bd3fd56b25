"""SIGTERM and Ctrl-C end a bench run as a KeyboardInterrupt, so that its ``finally``
blocks stop the processes it started and delete its keys; held back while it starts
a process (``starting``): raised inside ``subprocess.Popen``, the interrupt left a
process started but unknown to the code that stops it, running for good."""
from __future__ import annotations

import contextlib
import signal
from typing import Any, Iterator, Optional

#: The signals that end a bench run.
ENDING = (signal.SIGINT, signal.SIGTERM)


class _Held:
    depth = 0
    signum: Optional[int] = None


def _interrupted(signum: int, frame: Any) -> None:
    if _Held.depth:
        _Held.signum = signum  # raised as the start ends, once the process is known
        return
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt within (the main thread's only)."""
    previous = {signum: signal.signal(signum, _interrupted) for signum in ENDING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Hold back an interrupt until the process started within is recorded where the
    code that stops it looks."""
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if not _Held.depth and _Held.signum is not None:
            signum, _Held.signum = _Held.signum, None
            raise KeyboardInterrupt(f"signal {signum}")
