"""Signal handlers that take no lock: they note the signal and ring a socket; a
relay thread does what the signal asks.

A Python signal handler runs in the main thread between two bytecodes, perhaps
in the middle of ``threading.Event.set()`` or of a log record: a handler that
sets an Event or logs can then wait forever on a lock that the code it
interrupted holds (SIGTERM and SIGINT arriving together did exactly that).
"""
from __future__ import annotations

import collections
import os
import signal
import socket
import threading
from types import FrameType
from typing import Callable, Deque, Dict, Optional

Handler = Callable[[int, Optional[FrameType]], None]


class SignalRelay:
    """SIGTERM and SIGINT call ``act(name)`` in a thread of their own; a second SIGINT
    calls ``at_once()`` in the handler itself, which must take no lock (it kills,
    writes with ``os.write`` and exits)."""

    def __init__(self, act: Callable[[str], None], at_once: Callable[[], None]) -> None:
        self._act = act
        self._at_once = at_once
        self._interrupts = 0
        # deque.append takes no Python-level lock: safe from a handler
        self._heard: Deque[str] = collections.deque()

    def install(self) -> Callable[[], None]:
        """Install the handlers (main thread only); returns what puts the previous
        ones back and ends the relay thread."""
        listening, ringing = socket.socketpair()
        ringing.setblocking(False)
        owner = os.getpid()

        def on_signal(signum: int, frame: Optional[FrameType]) -> None:
            if os.getpid() != owner:
                # a forked child before it installs its own handlers: the socket is
                # shared with the parent, which must not hear of the child's signal
                # (the parent signals its children itself when it stops)
                return
            if signum == signal.SIGINT:
                self._interrupts += 1
                if self._interrupts > 1:
                    self._at_once()
            self._heard.append(signal.Signals(signum).name)
            try:
                ringing.send(b"!")
            except OSError:
                pass  # the buffer is full (the relay has a ring to read) or it is closed

        def relay() -> None:
            while listening.recv(64):
                while self._heard:
                    self._act(self._heard.popleft())

        thread = threading.Thread(target=relay, name="minitask-signals", daemon=True)
        thread.start()
        previous: Dict[int, object] = {
            sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            ringing.close()  # the relay reads the end of the stream and returns
            thread.join(timeout=5)
            listening.close()
        return restore
