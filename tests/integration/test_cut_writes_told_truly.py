"""An enqueue that Redis may have run is never said "not enqueued" (review 29f): a write
over 1 MiB whose reply is lost (H1), an app.batch() write cut after its first call
went whole (H2), a delay_many() whose later chunk is refused after earlier ones were
enqueued (M3). On a real redis-server: the lost reply through a cutting proxy, the cut
write through a proxy that stops reading."""
from __future__ import annotations

import socket
import threading
import time
from typing import Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.cutting import CuttingProxy
from tests.support.full_redis import full_after_first_chunk
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def _ready(admin: "redis.Redis[bytes]", app: str, queue: str) -> List[bytes]:
    return admin.lrange(QueueKeys(app, queue).ready[4], 0, -1)  # priority 5


def test_a_large_write_whose_reply_is_lost_says_it_may_have_been_enqueued(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    proxy = CuttingProxy(redis_server)
    app = Minitask("bigcut", broker=proxy.url, max_message_bytes=8_000_000)

    @app.task(name="t")
    def t(value: str) -> int:
        return len(value)

    try:
        t.delay("warm")  # the queue registered
        t.delay("warm")  # MULTI/EXEC asked: the plain path from now on
        proxy.cut_reply_to(b"*1\r\n$4\r\nEXEC\r\n")  # the reply to the whole write lost
        with pytest.raises(BrokerError) as lost:
            t.delay("x" * 2_000_000)
        assert proxy.cuts == 1
        assert lost.value.sent, str(lost.value)
        assert lost.value.task_id is not None
        # (the proxy may close before EXEC reaches Redis: then nothing of it ran, whole)
        task_id, deadline = lost.value.task_id.encode(), time.monotonic() + 5
        while task_id not in _ready(admin, "bigcut", "default") and time.monotonic() < deadline:
            time.sleep(0.05)  # (EXEC may wait in Redis's socket behind this client's reads)
        written = task_id in _ready(admin, "bigcut", "default")
        assert written == admin.hexists(QueueKeys("bigcut", "default").messages, task_id)
        assert "may have been made" in str(lost.value)
    finally:
        app.close()
        proxy.close()


class _StallingProxy:
    """Forwards each connection to ``server``; armed, the next write from the client is
    forwarded up to ``limit`` bytes, then the proxy stops reading: the client's write
    stalls and times out part way."""

    def __init__(self, server: RedisServer) -> None:
        self.upstream = ("127.0.0.1", server.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.limit = 0
        self.armed = False
        self.stop = threading.Event()
        self._sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream, timeout=10)
            upstream.settimeout(None)
            for one in (client, upstream):
                one.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, up: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if up and self.armed:
                    self.armed = False
                    target.sendall(data[:self.limit])
                    self.stop.wait(60)  # reads nothing more: the client's write stalls
                    break
                target.sendall(data)
        except OSError:
            pass
        for one in (source, target):
            try:
                one.close()
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        for one in (self._listener, *self._sockets):
            try:
                one.close()
            except OSError:
                pass


@pytest.fixture
def stalling(redis_server: RedisServer) -> Iterator[_StallingProxy]:
    proxy = _StallingProxy(redis_server)
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_batch_write_cut_after_its_first_call_says_that_call_may_have_run(
        admin: "redis.Redis[bytes]", stalling: _StallingProxy) -> None:
    app = Minitask("stallcut", broker=f"redis://127.0.0.1:{stalling.port}/0?socket_timeout=2",
                   max_message_bytes=64_000_000)

    @app.task(name="a", queue="qa")
    def a(value: str) -> str:
        return value

    @app.task(name="b", queue="qb")
    def b(value: str) -> int:
        return len(value)

    try:
        with app.batch():  # the scripts loaded: the armed write runs its first call
            a.delay("w")
            b.delay("w")
        stalling.limit = 4000  # queue qa's whole call (a small task), a little of qb's
        stalling.armed = True
        with pytest.raises(BrokerError) as cut:
            with app.batch():
                small = a.delay("small")
                big = b.delay("z" * 40_000_000)
        deadline = time.monotonic() + 10
        while small.id.encode() not in _ready(admin, "stallcut", "qa"):
            assert time.monotonic() < deadline, "queue qa's call never ran"
            time.sleep(0.05)
        assert cut.value.sent, str(cut.value)  # qa's call ran: "may have been", never "not"
        assert cut.value.task_ids == [small.id]
        assert big.id not in str(cut.value).split("may have been enqueued")[-1]
        assert not _ready(admin, "stallcut", "qb")[1:]  # qb: only the warm-up task
    finally:
        app.close()


def test_a_later_chunk_refused_names_the_tasks_the_chunks_before_enqueued(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app = Minitask("chunkcut", broker=redis_server.url)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    try:
        t.delay("warm")
        with full_after_first_chunk(admin), pytest.raises(BrokerError) as refused:
            t.delay_many([("p" * 2000,) for _ in range(2500)])
        ready = _ready(admin, "chunkcut", "default")[1:]
        assert len(ready) == 1000
        assert refused.value.reason == "out of memory"
        assert refused.value.sent, str(refused.value)  # never "nothing was enqueued"
        assert [i.encode() for i in refused.value.task_ids] == ready
        assert "the first 1000 of the call's 2500 task(s) were enqueued" in str(refused.value)
    finally:
        admin.config_set("maxmemory", 0)
        app.close()
