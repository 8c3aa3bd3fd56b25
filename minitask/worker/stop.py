"""Stopping: the request (signals, ``stop()``), the grace, and giving back the rest."""
from __future__ import annotations

import os
import socket
import threading
from typing import Callable, List, Optional, Protocol, Sequence

from ..printable import own_logger
from .leases import Holdings, Job, Leases
from .signals import SignalRelay

logger = own_logger(__name__)


#: Tasks the end of the grace names, a line each (the rest are counted).
NAMED_MOST = 20


class Bell:
    """A socket pair that turns readable once rung: a wait on Redis watches it, so a
    stop (a signal, or ``stop()`` from another thread) ends the wait at once,
    without raising from a signal handler into the middle of a reply.

    Sockets, not a raw pipe: once closed, a late ring fails instead of writing
    to whatever file reuses the number.
    """

    def __init__(self) -> None:
        self._heard, self._rung = socket.socketpair()
        self._rung.setblocking(False)

    def fileno(self) -> int:
        return self._heard.fileno()

    def ring(self) -> None:
        try:
            self._rung.send(b"!")
        except OSError:
            pass  # already rung (the buffer is full) or closed

    def close(self) -> None:
        self._rung.close()
        self._heard.close()


class Stop:
    """Whether a stop was asked and why; asking wakes whoever must hear of it at once."""

    def __init__(self, wakers: Sequence[Callable[[], None]] = ()) -> None:
        self.event = threading.Event()
        #: The signal that asked for the stop, if one did ("SIGTERM").
        self.reason = ""
        self._wakers: List[Callable[[], None]] = list(wakers)
        self._bell: Optional[Bell] = None
        #: Whether a stop was asked: the event's own method, asked at every fetch (a
        #: method of this class calling it would be one more Python call a task)
        self.is_set: Callable[[], bool] = self.event.is_set

    def request(self) -> None:
        self.event.set()
        for wake in self._wakers:
            wake()
        bell = self._bell
        if bell is not None:
            bell.ring()

    def open_bell(self) -> None:
        """From now on a stop also rings a bell, which a wait on Redis watches."""
        self._bell = Bell()

    def bell_fileno(self) -> Optional[int]:
        bell = self._bell
        return None if bell is None else bell.fileno()

    def silence(self) -> None:
        bell, self._bell = self._bell, None
        if bell is not None:
            bell.close()

    def install_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT ask for a stop (a second SIGINT exits at once); returns
        what puts the previous handlers back. Only the main thread can do this."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def asked(name: str) -> None:
            if not self.event.is_set():
                self.reason = name
            self.request()

        def at_once() -> None:
            os.write(2, b"minitask: second interrupt: exiting at once\n")
            os._exit(130)
        return SignalRelay(asked, at_once).install()


class Idle(Protocol):
    """A pool, as far as a shutdown waits for it."""

    def wait_idle(self, timeout: Optional[float] = None) -> bool: ...


class Shutdown:
    """How a worker ends once a stop is asked: what has not started goes back at
    once, running tasks get the grace, and what is still held after it goes back."""

    def __init__(self, holdings: Holdings, leases: Leases, stop: Stop) -> None:
        self._holdings = holdings
        self._leases = leases
        self._stop = stop
        #: In a process pool child: hears, once a stop is asked, of the task still running.
        self.on_stopping: Optional[Callable[[Optional[Job]], None]] = None

    def stopping(self) -> None:
        """Once a stop is asked: give back the buffer now, not after the running task."""
        running = self._holdings.close()
        self._leases.give_back_buffer()
        if self.on_stopping is not None:
            self.on_stopping(running)

    def close(self, threads: Idle, grace: float,
              on_grace_over: Optional[Callable[[], None]] = None) -> None:
        """Stop taking tasks, give running ones the grace, give back the rest;
        ``on_grace_over`` stops what still runs (the asyncio pool cancels it)."""
        self._holdings.close()
        if self._stop.reason:
            logger.info("%s received: stopping (grace %s s)", self._stop.reason, grace)
        if not threads.wait_idle(grace):
            still = self._holdings.started(1_000_000_000)
            logger.warning("grace of %s s is over; giving back %d task(s) still running",
                           grace, len(still))
            for task_id in still[:NAMED_MOST]:  # as the process pool names each
                logger.warning("grace is over: giving back task %s", task_id,
                               extra={"task_id": task_id, "task_name": ""})
            if len(still) > NAMED_MOST:
                logger.warning("grace is over: giving back %d more task(s), not named",
                               len(still) - NAMED_MOST)
            if on_grace_over is not None:
                on_grace_over()
        self._leases.release_all()
