"""The commands Redis runs while a test acts, scripts' own included (MONITOR): for
tests that a planted member is never passed back to Redis."""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

from tests.support.servers import RedisServer

END = "end-of-test-commands"


def carrying(redis_server: RedisServer, mark: bytes,
             act: Callable[[], Any]) -> Tuple[List[bytes], Any]:
    """The commands that carry ``mark`` while ``act`` runs (MONITOR's lines up to an
    ECHO sent after it, each cut to 80 bytes), and what ``act`` returned."""
    watcher = redis_server.client(socket_timeout=60)
    other = redis_server.client()
    try:
        with watcher.monitor() as monitor:
            result = act()
            other.echo(END)
            seen: List[bytes] = []
            while True:
                line = monitor.connection.read_response()
                line = line if isinstance(line, bytes) else str(line).encode()
                if END.encode() in line:
                    return seen, result
                if mark in line:
                    seen.append(line[:80])
    finally:
        watcher.close()
        other.close()
