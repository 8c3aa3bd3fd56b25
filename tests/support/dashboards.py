"""An app's dashboard served on a free loopback port by a thread of the test's own
process (``serving``), and whether the server closed a connection (``closed_by_peer``)."""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from minitask.dashboard.server import make

#: How long a test waits for the server's thread to end, or for a connection's close.
DEADLINE = 30.0


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[Any]:
    """The dashboard server of ``app`` (``make``'s ``options``), serving until the block
    ends: then shut down, closed and its thread joined (bounded)."""
    server = make(app, "127.0.0.1", 0, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(DEADLINE)


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server closed this connection (EOF or reset), waiting at most DEADLINE."""
    sock.settimeout(DEADLINE)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
