"""The test proxy that loses a reply (tests/support/cutting.py) finds its marker also
when the command holding it reaches the proxy in two reads, split inside the marker
(a large call, a slow link). Before: each read was searched alone, the marker was
missed, and the reply the test meant to lose came back.
"""
from __future__ import annotations

import socket
import time
import uuid

from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer


def _command(*parts: bytes) -> bytes:
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def test_a_marker_split_across_two_reads_is_found(redis_server: RedisServer) -> None:
    proxy = CuttingProxy(redis_server)
    key = f"split-{uuid.uuid4().hex}"
    marker = f"marker-{uuid.uuid4().hex}".encode()
    try:
        proxy.cut_reply_to(marker)
        wire = _command(b"SET", key.encode(), b"value " + marker)
        middle = wire.index(marker) + len(marker) // 2
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sendall(wire[:middle])
            time.sleep(0.3)  # the proxy reads the first half alone
            client.sendall(wire[middle:])
            try:
                reply = client.recv(1024)
            except ConnectionResetError:
                reply = b""
        assert reply == b"", f"the reply came back: {reply!r}"
        assert proxy.cuts == 1
        with redis_server.client() as check:
            assert check.get(key) == b"value " + marker  # the command ran
    finally:
        proxy.close()
