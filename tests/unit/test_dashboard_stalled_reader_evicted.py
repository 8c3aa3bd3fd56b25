"""Every dashboard connection taken, none still sending its request, one page still
being computed and one reply waiting on a slow reader past ``STALLED_GRACE``: a new
connection closes the slow reader. A connection's ``stalled_since`` was set after the
``return`` of ``closing()`` (never run), so one whose reply had never waited had none:
choosing raised AttributeError, and the new connection got a traceback instead of a
slot (today's probe). No HTTP traffic: the server's choice is asked directly."""
from __future__ import annotations

import socket
import time
from typing import Iterator

import pytest

from minitask.dashboard.server import STALLED_GRACE, _Connection, _Handler, _Server


@pytest.fixture
def server() -> Iterator[_Server]:
    made = _Server(("127.0.0.1", 0), _Handler)
    try:
        yield made
    finally:
        made.server_close()


def test_a_slow_reader_is_chosen_while_another_page_is_being_computed(
        server: _Server) -> None:
    computing, stalled = _Connection(socket.socket()), _Connection(socket.socket())
    try:
        stalled.stalled_since = time.monotonic() - 2 * STALLED_GRACE
        server._connections = {"computing": computing, "stalled": stalled}
        server._open = server.max_connections
        with server._held:
            assert server._slowest() is stalled
    finally:
        computing.sock.close()
        stalled.sock.close()


def test_no_connection_is_chosen_while_every_page_is_being_computed(server: _Server) -> None:
    computing = _Connection(socket.socket())
    try:
        server._connections = {"computing": computing}
        with server._held:
            assert server._slowest() is None
    finally:
        computing.sock.close()
