"""The dashboard's server bounds its connections: silent ones are closed after the
idle bound, so that half-open clients cannot hold its threads, and it answers on."""
from __future__ import annotations

import socket
import threading
import time
import urllib.request
from typing import Any, Iterator, List

import pytest

from minitask import Minitask
from tests.support.dashboards import closed_by_peer, serving

pytestmark = pytest.mark.integration

DEADLINE = 30.0


@pytest.fixture
def served(redis_server: Any) -> Iterator[Any]:
    redis_server.client().flushall()
    app = Minitask("dash", broker=redis_server.url)
    try:
        with serving(app, max_connections=20, idle_timeout=0.5) as server:
            yield server
    finally:
        app.close()


def _get(port: int, path: str = "/") -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=DEADLINE) as reply:
        return int(reply.status)


def test_half_open_connections_are_closed_after_the_idle_bound_and_it_answers_on(
        served: Any) -> None:
    port = served.server_port
    before = threading.active_count()
    silent: List[socket.socket] = []
    try:
        for n in range(60):
            sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
            if n % 2:
                sock.sendall(b"GET / HT")  # a request never finished
            silent.append(sock)
        # at most max_connections threads at any time, whatever the clients hold
        assert threading.active_count() - before <= 20
        assert all(closed_by_peer(sock) for sock in silent)
    finally:
        for sock in silent:
            sock.close()
    deadline = time.monotonic() + DEADLINE
    while threading.active_count() > before:  # each closed connection's thread ends
        assert time.monotonic() < deadline, "the connections' threads never ended"
        time.sleep(0.02)
    assert _get(port) == 200
    assert _get(port, "/metrics") == 200
