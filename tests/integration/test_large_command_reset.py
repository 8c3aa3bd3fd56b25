"""A command over 1 MiB that meets a reset (CI, stop 42): Redis closes the connection
as it reads a value over its ``proto-max-bulk-len``, and when the reset reached the
client before the end of its write the error reply was lost, so the refusal read as
an outage ('unreachable': written again, "lost Redis" logged) about half the time.
Now a failed write is followed by a PING on a new connection: Redis answering and
stating a proto-max-bulk-len under the command's size means it refused the command
('protocol'); Redis gone, or a command under its limit (a reset of another cause,
probe 17 H2: a task that succeeded was dead-lettered), means an outage."""
from __future__ import annotations

import socket
import struct
import threading
from typing import Any, Callable, Iterator, List

import pytest

from minitask import BrokerError, Minitask

pytestmark = pytest.mark.integration

BIG = "x" * 1_200_000  # over the server's 1 MiB, under the app's max_message_bytes


def test_a_command_over_the_servers_bulk_limit_is_always_refused_never_an_outage(
        start_redis: Callable[..., Any]) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    app = Minitask("large", broker=server.url, max_message_bytes=8_000_000)

    @app.task(name="take")
    def take(value: str) -> None:
        """Never runs: Redis cannot take its message."""

    try:
        reasons = []
        for _ in range(12):  # the reset raced the reply in about one try of two
            with pytest.raises(BrokerError) as refused:
                take.delay(BIG)
            reasons.append(refused.value.reason)
            assert "proto-max-bulk-len" in str(refused.value)
        assert reasons == ["protocol"] * 12
        assert take.delay("small").status() == "queued"  # the connection is usable again
    finally:
        app.close()


class _CuttingProxy:
    """Forwards to a real Redis until a client has sent 512 KiB on one connection;
    then resets that connection and, unless ``stays_up``, refuses every new one, as
    a server gone down (else as a reset of another cause: a failover, a proxy)."""

    def __init__(self, upstream_port: int, stays_up: bool = False) -> None:
        self.upstream_port = upstream_port
        self.stays_up = stays_up
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: List[threading.Thread] = []
        self._start(self._accept)

    def stop_listening(self) -> None:
        """Shut down first: a bare close would leave the blocked accept() listening."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed: the server is "down"
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._start(self._pump, client, upstream, True)
            self._start(self._pump, upstream, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        sent = 0
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sent += len(data)
                if from_client and sent > 512 * 1024:
                    if not self.stays_up:
                        self.stop_listening()  # nobody answers a new connection
                    source.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      struct.pack("ii", 1, 0))
                    break  # closed below with unread data and no linger: a reset
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.close()
                except OSError:
                    pass


@pytest.fixture(params=[False, True], ids=["redis down", "redis up"])
def cutting_proxy(start_redis: Callable[..., Any],
                  request: pytest.FixtureRequest) -> Iterator[_CuttingProxy]:
    server = start_redis()  # proto-max-bulk-len: Redis's default, 512 MB
    proxy = _CuttingProxy(server.port, stays_up=request.param)
    try:
        yield proxy
    finally:
        proxy.stop_listening()


def test_a_large_command_cut_by_a_reset_under_the_limit_is_an_outage(
        cutting_proxy: _CuttingProxy) -> None:
    app = Minitask("gone", broker=f"redis://127.0.0.1:{cutting_proxy.port}/0",
                   max_message_bytes=64_000_000)

    @app.task(name="take")
    def take(value: str) -> None:
        """Never runs: its connection is reset as its message is sent."""

    try:
        assert take.delay("small").status() == "queued"  # through the proxy, at first
        with pytest.raises(BrokerError) as lost:
            take.delay("x" * 20_000_000)  # more than the sockets buffer: the write fails
        assert lost.value.reason == "unreachable"
        assert "the command was 20,0" in str(lost.value)  # its size, and the other cause
    finally:
        app.close()
