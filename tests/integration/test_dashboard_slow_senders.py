"""Slow senders (slowloris: a header line every so often, never the end of the request)
cannot keep the dashboard from answering: each request must arrive whole within the
request deadline, and when every connection is taken a new one closes the one that has
been sending its request the longest. Before, 70 such clients held all 64 connections
and every real request was closed unanswered for as long as they trickled."""
from __future__ import annotations

import socket
import threading
import time
import urllib.request
from typing import Any, Iterator, List

import pytest

from minitask import Minitask
from minitask.dashboard.server import STALLED_GRACE, make
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 30.0
SLOTS = 8
#: Seconds between two header lines of a slow sender: well under the idle bound.
TRICKLE = 0.3


@pytest.fixture
def app(redis_server: Any) -> Iterator[Minitask]:
    redis_server.client().flushall()
    made = Minitask("dash", broker=redis_server.url)
    yield made
    made.close()


def serve(server: Any) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def stop(server: Any, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(DEADLINE)


def get(port: int, path: str = "/metrics") -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=DEADLINE) as reply:
        return int(reply.status)


class Slowloris:
    """``count`` connections, each sending a request line and then a header line every
    TRICKLE seconds, reconnecting when closed, until ``stop``; ``closed`` counts the
    connections the server closed."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.socks: List[socket.socket] = [self._open() for _ in range(count)]
        self.closed = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=DEADLINE)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        return sock

    def _trickle(self) -> None:
        end = time.monotonic() + 4 * DEADLINE
        while not self.done.wait(TRICKLE) and time.monotonic() < end:
            for index, sock in enumerate(self.socks):
                try:
                    sock.sendall(b"X-a: b\r\n")
                except OSError:
                    self.closed += 1
                    sock.close()
                    try:
                        self.socks[index] = self._open()
                    except OSError:
                        pass

    def stop(self) -> None:
        self.done.set()
        self.thread.join(DEADLINE)
        for sock in self.socks:
            sock.close()


def test_a_full_house_of_slow_senders_never_keeps_a_real_request_out(app: Minitask) -> None:
    server = make(app, "127.0.0.1", 0, max_connections=SLOTS, idle_timeout=5.0)
    thread = serve(server)
    port = server.server_port
    before = threading.active_count()
    slow = Slowloris(port, SLOTS + 4)
    try:
        # every connection taken by a slow sender (a thread each, and the trickle's)
        wait_until(lambda: threading.active_count() >= before + SLOTS + 1, timeout=DEADLINE,
                   message="the slow senders holding every connection")
        for _ in range(5):  # each answered at once, however full the house
            started = time.monotonic()
            assert get(port) == 200
            assert time.monotonic() - started < DEADLINE / 3
        assert threading.active_count() < before + SLOTS + 10  # the thread bound holds
    finally:
        slow.stop()
        stop(server, thread)


def test_a_request_that_never_arrives_whole_is_closed_at_the_request_deadline(
        app: Minitask) -> None:
    server = make(app, "127.0.0.1", 0, max_connections=SLOTS, idle_timeout=5.0,
                  request_timeout=1.0)
    thread = serve(server)
    port = server.server_port
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < DEADLINE and not closed:
            try:
                sock.sendall(b"X-a: b\r\n")  # every TRICKLE s: never silent past idle
                sock.settimeout(TRICKLE)
                closed = sock.recv(1) == b""
            except socket.timeout:
                continue
            except OSError:
                closed = True
        sock.close()
        assert closed, "the slow request was never closed"
        # closed at the request deadline (1 s), long before the idle bound would
        assert time.monotonic() - started < 4.0
        assert get(port) == 200
    finally:
        stop(server, thread)


def test_connections_closed_unanswered_are_said_in_one_line_a_minute(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    """Every connection being answered, a flood of new ones is closed unanswered: one
    WARNING line says how many, not one line each (243 lines for 300 connections)."""
    server = make(app, "127.0.0.1", 0, max_connections=SLOTS)
    try:
        with caplog.at_level("WARNING", logger="minitask.dashboard.server"):
            for _ in range(300):
                server._say_refused("127.0.0.1")
        lines = [r.getMessage() for r in caplog.records if "unanswered" in r.getMessage()]
        assert len(lines) == 1, lines
    finally:
        server.server_close()


def test_a_full_house_of_slow_readers_never_keeps_a_real_request_out(app: Minitask) -> None:
    """Clients that ask for a large reply and never read it: each write waits on its
    client; a new connection closes the one that has waited longest (at least
    STALLED_GRACE), instead of being closed unanswered for RESPONSE_TIMEOUT."""
    server = make(app, "127.0.0.1", 0, max_connections=SLOTS, idle_timeout=20.0)
    pages = server.get_app()
    large = b"x" * 20_000_000  # far more than the socket buffers hold

    def with_a_large_page(environ: Any, start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/large":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [large]
        return pages(environ, start_response)

    server.set_app(with_a_large_page)
    thread = serve(server)
    port = server.server_port
    before = threading.active_count()
    readers: List[socket.socket] = []
    try:
        for _ in range(SLOTS):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(DEADLINE)
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /large HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            readers.append(sock)  # and never read
        wait_until(lambda: threading.active_count() >= before + SLOTS, timeout=DEADLINE,
                   message="the slow readers holding every connection")

        def stalled() -> bool:  # every reply waiting on its client past the grace
            now = time.monotonic()
            held = list(server._connections.values())
            return len(held) == SLOTS and all(
                c.stalled_since is not None and now - c.stalled_since > STALLED_GRACE
                for c in held)

        wait_until(stalled, timeout=DEADLINE, message="every reply waiting on its client")
        started = time.monotonic()
        assert get(port) == 200
        assert time.monotonic() - started < DEADLINE / 3
    finally:
        for sock in readers:
            sock.close()
        stop(server, thread)
