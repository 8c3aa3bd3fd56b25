"""How many times Redis ran a script call: MONITOR on every node of a test's cluster.

Redis shows on MONITOR the commands it took, never one it refused before (a
redirect, TRYAGAIN, LOADING), and a script's own commands right after its
EVALSHA (marked "lua"): an EVALSHA line that holds a marker (a task id) and is
followed by a "lua" line is a run of that call (one that got NOSCRIPT is followed
by none), where ``INFO commandstats`` would count every script of the send (a
queue's registration, say). A node restarted meanwhile is watched again as soon
as it answers.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import List, Sequence

from tests.support.servers import RedisServer


class ScriptRuns:
    """MONITOR connections to ``nodes``, counting the runs of EVALSHA calls that hold
    ``marker`` (a run: its script's commands follow it)."""

    def __init__(self, nodes: Sequence[RedisServer], marker: bytes) -> None:
        self.marker = marker
        self.runs = 0
        self._lock = threading.Lock()
        self._closed = False
        self._sockets: List[socket.socket] = []
        self._watching = threading.Semaphore(0)
        for node in nodes:
            threading.Thread(target=self._watch, args=(node.port,), daemon=True).start()
        for _ in nodes:  # every node watched before the test goes on
            assert self._watching.acquire(timeout=30), "MONITOR did not start"

    def _watch(self, port: int) -> None:
        first = True
        while not self._closed:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                time.sleep(0.01)  # (restarting: watched again once it answers)
                continue
            self._sockets.append(sock)
            try:
                sock.settimeout(None)
                sock.sendall(b"MONITOR\r\n")
                lines = sock.makefile("rb")
                if lines.readline() != b"+OK\r\n":
                    raise OSError("MONITOR refused")
                if first:
                    first = False
                    self._watching.release()
                called = False  # the line before: an EVALSHA holding the marker
                for line in lines:
                    if called and b" lua] " in line:
                        with self._lock:
                            self.runs += 1
                    called = b'"evalsha"' in line.lower() and self.marker in line
            except OSError:
                pass
            finally:
                sock.close()

    def count(self, settle: float = 0.3) -> int:
        """The runs seen, once the last lines had ``settle`` seconds to arrive."""
        time.sleep(settle)
        with self._lock:
            return self.runs

    def close(self) -> None:
        self._closed = True
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
