"""A TCP proxy to a test's redis-server that can lose a reply: a command reaches Redis
and runs, then the connection is closed before any byte of its reply comes back (or,
``hold_reply_to``, left open with no reply: the client's socket timeout ends it); and a
stand-in for a transport's round trips that loses chosen replies the same way
(``lose_replies``: where no proxy can pick the call, such as one call of a block sent a
call at a time); what a send whose reply was lost must say (``said_lost``), and async
checks run with the app closed after (``run_closing``)."""
from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Awaitable, Callable, List, Optional

import pytest
import redis

from minitask.errors import BrokerError

from tests.support.servers import RedisServer


class CuttingProxy:
    """Forwards every connection to ``server``; ``cut_reply_to(marker)`` arms it: the
    reply to the first write holding ``marker`` (also split across two reads) is
    dropped and that connection closed (a marker: the reply of a connection's set-up,
    say, is never the one cut). ``hold_reply_to(marker)``: that reply is withheld and
    the connection left open, as a stalled Redis or a stalled client leaves it: the
    client's socket timeout gives up on a command Redis ran (``holds`` counts them)."""

    def __init__(self, server: RedisServer) -> None:
        self.upstream = ("127.0.0.1", server.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._marker: Optional[bytes] = None
        self._holding = False  # the armed marker's reply is withheld, not cut
        self.cuts = 0
        self.holds = 0
        self._sockets: List[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_reply_to(self, marker: bytes) -> None:
        self._holding = False
        self._marker = marker

    def hold_reply_to(self, marker: bytes) -> None:
        self._holding = True
        self._marker = marker

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream, timeout=10)
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            cut = threading.Event()  # this connection's next reply is dropped
            held = threading.Event()  # ... or withheld, the connection left open
            threading.Thread(target=self._pump, args=(client, upstream, cut, False, held),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, cut, True, held),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, cut: threading.Event,
              replies: bool, held: threading.Event) -> None:
        tail = b""  # the end of the last read: a marker may be split across two
        withheld = False  # a reply of this connection was withheld (counted once)
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                marker = self._marker
                if not replies and marker is not None and _holds(tail, data, marker):
                    self._marker = None
                    (held if self._holding else cut).set()
                if not replies:
                    tail = (tail + data[-_TAIL:])[-_TAIL:]
                if replies and cut.is_set():
                    self.cuts += 1
                    break  # the reply dropped: both ends closed below
                if replies and held.is_set():
                    self.holds += not withheld
                    withheld = True
                    continue  # withheld, and every reply after it on this connection
                target.sendall(data)
        except OSError:
            pass
        _close(source, target)

    def close(self) -> None:
        self._closed = True
        _close(self._listener, *self._sockets)


#: Bytes of a connection's last writes kept to find a marker split across reads
#: (longer than any marker a test arms).
_TAIL = 1024


def _holds(tail: bytes, data: bytes, marker: bytes) -> bool:
    """Whether ``marker`` ends in ``data``, the read after ``tail``: one that lies wholly
    in ``tail`` was there before it was armed (or was found then)."""
    kept = tail[max(0, len(tail) - len(marker) + 1):]
    return marker in kept + data


def _close(*sockets: Optional[socket.socket]) -> None:
    for one in sockets:
        if one is None:
            continue
        try:
            one.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        one.close()


def batch_call(calls: Any, what: str) -> bool:
    """A call of an ``app.batch()`` block (``lose_replies``)."""
    return what.startswith("enqueue an app.batch()")


def lose_replies(transport: Any, monkeypatch: pytest.MonkeyPatch,
                 picked: Callable[[Any, str], bool], only: Optional[int] = None) -> None:
    """``transport.run_calls`` runs each call in Redis, then raises as a reset connection
    does, the reply lost (``sent=True``), for the calls ``picked(calls, what)`` chooses:
    all of them, or ``only`` the one of that rank among them (1 the first)."""
    real, seen = transport.run_calls, [0]

    def run_calls(calls: Any, what: str, *args: Any, **kwargs: Any) -> Any:
        replies = real(calls, what, *args, **kwargs)
        if picked(calls, what):
            seen[0] += 1
            if only is None or seen[0] == only:
                raise BrokerError(f"could not {what}: Connection reset (reply lost)",
                                  sent=True)
        return replies

    monkeypatch.setattr(transport, "run_calls", run_calls)


def call_at_a_time(transport: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain Redis seen by ``transport`` as Redis Cluster is: no pool (a batch sent a
    call at a time), a sending script written by ``cluster_sends.send_once`` — stood in
    for by one EVALSHA on the plain client, its refusal in its place."""
    connections = transport.connections

    class NoPool:
        pool = None

        def __getattr__(self, name: str) -> Any:
            return getattr(connections, name)

    def send_once(client: Any, sha: str, source: str, keys: Any, args: Any,
                  then: Any = ()) -> List[Any]:
        assert not then, "a stand-in for unconfirmed sends only"
        try:
            try:
                return [client.evalsha(sha, len(keys), *keys, *args)]
            except redis.exceptions.NoScriptError:
                client.script_load(source)  # (as send_once does: it did not run)
                return [client.evalsha(sha, len(keys), *keys, *args)]
        except redis.ResponseError as exc:
            return [exc]

    monkeypatch.setattr(transport, "connections", NoPool())
    monkeypatch.setattr("minitask.broker.transport.send_once", send_once)


def said_lost(error: BrokerError, task_id: str) -> None:
    """The error of a send whose reply was lost: maybe made, the id listed."""
    assert error.sent, str(error)
    assert "could not" not in str(error), str(error)
    assert "lost the reply" in str(error), str(error)
    assert task_id in (error.task_ids or [error.task_id]), (error.task_ids, str(error))


def run_closing(app: Any, checks: Callable[[], Awaitable[None]]) -> None:
    """Run ``checks`` on a loop of their own, the app's async client closed on that loop
    (its connections are that loop's), then the app."""
    async def main() -> None:
        try:
            await checks()
        finally:
            await app.aclose()

    try:
        asyncio.run(main())
    finally:
        app.close()
