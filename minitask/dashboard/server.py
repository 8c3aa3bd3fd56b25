"""Serving the dashboard: the standard library's WSGI server, a thread per
connection (a slow page never holds up ``/metrics``), bound to 127.0.0.1 unless
told otherwise.

Connections are bounded, and so is what each may hold:

* at most ``MAX_CONNECTIONS`` are served at once, each on a thread of its own;
* a request (its line, headers and a form's body) must arrive whole within
  ``REQUEST_TIMEOUT`` seconds of its connection being accepted, and no read waits
  longer than ``IDLE_TIMEOUT``: a client gone half-open, or one sending a header
  line every few seconds (slowloris), is closed;
* a reply must be taken whole within ``RESPONSE_TIMEOUT`` seconds of its first
  byte;
* when every connection is taken, a new one closes the connection that has been
  sending its request the longest (a client still sending one is no client being
  answered), else the one whose reply has waited on its client the longest, at
  least ``STALLED_GRACE``: slow senders and slow readers, however many, never keep
  a new client out. Only when every connection is computing its page (or has
  waited on its client for less than ``STALLED_GRACE``) is a new one closed
  unanswered.
"""
from __future__ import annotations

import io
import socket
import socketserver
import sys
import threading
import time
from typing import Any, Dict, Optional, Tuple
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from ..app import Minitask
from ..printable import own_logger
from .web import MAX_BODY, Dashboard, is_loopback

logger = own_logger(__name__)

#: Connections served at once; each holds a thread.
MAX_CONNECTIONS = 64
#: Seconds a connection may stay silent (one read of its request, one write of its reply).
IDLE_TIMEOUT = 10.0
#: Seconds a client has to send its whole request (line, headers and body), from the
#: moment its connection is accepted.
REQUEST_TIMEOUT = 10.0
#: Seconds a client has to take the whole reply, from its first byte.
RESPONSE_TIMEOUT = 30.0
#: Seconds between two log lines saying connections were closed unanswered, at most.
REFUSED_SAID_EVERY = 60.0
#: Seconds between two log lines saying slow or idle connections were closed (silent
#: past a bound, or closed for a newer one), at most: each line counts those closed
#: since the last, so a flood of slow clients makes one line a period, not one each.
CLOSED_SAID_EVERY = 60.0
#: Seconds a write of a reply must have waited on its client (a slow reader) before
#: a new connection may close it, when every connection is taken.
STALLED_GRACE = 1.0
#: Seconds a new connection waits for the one it closed (a slow sender) to let go.
_EVICT_WAIT = 1.0


class _Connection:
    """One accepted connection: while it is sending its request, a newer one may
    close it (``evicted``)."""

    def __init__(self, sock: socket.socket, client: str = "?") -> None:
        self.sock = sock
        self.client = client
        self.accepted = time.monotonic()
        self.evicted = False
        #: why the server closed it before it was answered ('' : it did not)
        self.closed_why = ""
        #: since when a write of its reply waits on the client (None: none does)
        self.stalled_since: Optional[float] = None

    def closing(self, why: str) -> ConnectionAbortedError:
        """The error that ends this connection's thread, noting ``why`` (the first
        reason noted stays: a newer connection's, before the read it ends)."""
        self.closed_why = self.closed_why or why
        return ConnectionAbortedError(why)


class _RequestReader(io.RawIOBase):
    """The connection as its request is read: each read waits at most the idle bound
    and never past the request's deadline; a connection closed for a newer one reads
    as aborted, not as the end of a request (which would be served half-read)."""

    def __init__(self, connection: _Connection, idle: float, deadline: float) -> None:
        self._connection = connection
        self._idle = idle
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if self._connection.evicted:
            raise self._connection.closing("closed for a newer connection while still "
                                           "sending its request")
        if left <= 0:
            raise self._connection.closing("the request did not arrive whole within "
                                           "the request deadline")
        self._connection.sock.settimeout(min(self._idle, left))
        try:
            read = self._connection.sock.recv_into(buffer)
        except socket.timeout as exc:
            raise self._connection.closing(f"silent for {min(self._idle, left):.1f} s while "
                                           f"sending its request") from exc
        if not read and self._connection.evicted:
            raise self._connection.closing("closed for a newer connection while still "
                                           "sending its request")
        return read


class _ReplyWriter(io.RawIOBase):
    """The connection as its reply is written: each write waits at most the idle
    bound and never past RESPONSE_TIMEOUT from the reply's first byte; one that has
    waited on the client for STALLED_GRACE may be closed for a newer connection."""

    def __init__(self, connection: _Connection, idle: float, most: float) -> None:
        self._connection = connection
        self._idle = idle
        self._most = most
        self._deadline: Optional[float] = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self._most
        left = self._deadline - now
        if left <= 0 or self._connection.evicted:
            raise self._connection.closing("the reply was not taken whole in time (the "
                                           "response deadline, or a newer connection)")
        sock = self._connection.sock
        sock.settimeout(min(self._idle, left))
        self._connection.stalled_since = now
        try:
            sock.sendall(data)  # bounded as a whole by the timeout
        except socket.timeout as exc:  # a client not reading: nothing to trace
            raise self._connection.closing("the client stopped taking the reply") from exc
        finally:
            self._connection.stalled_since = None
        with memoryview(data) as view:
            return view.nbytes


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    #: Connections the kernel queues until accepted (socketserver's 5 dropped the
    #: SYN of a burst, which the client sends again only a second later).
    request_queue_size = 128
    #: The bounds, set by ``make``.
    idle_timeout = IDLE_TIMEOUT
    request_timeout = REQUEST_TIMEOUT
    response_timeout = RESPONSE_TIMEOUT
    max_connections = MAX_CONNECTIONS

    def server_activate(self) -> None:
        super().server_activate()
        self._held = threading.Condition()
        #: connections served (each a thread), and those still sending their request,
        #: the oldest first
        self._open = 0
        self._sending: Dict[Any, _Connection] = {}
        self._connections: Dict[Any, _Connection] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._admit(request, str(client_address[0])):
            self._say_refused(client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)  # no thread started: none will release it
            raise

    def _say_refused(self, client: str) -> None:
        """One WARNING line per REFUSED_SAID_EVERY seconds at most, counting the
        connections closed unanswered since the last (a flood made a line each)."""
        self._refused = getattr(self, "_refused", 0) + 1
        now = time.monotonic()
        said = getattr(self, "_refused_said", None)
        if said is None or now - said >= REFUSED_SAID_EVERY:
            logger.warning("dashboard: %d connections are being answered already; closed "
                           "%d new one(s) unanswered since the last such line (the last "
                           "from %s)", self.max_connections, self._refused, client)
            self._refused, self._refused_said = 0, now

    def _admit(self, request: Any, client: str) -> bool:
        """Take a connection slot for ``request``: when none is free, close the
        connection sending its request the longest and wait for it to let go."""
        with self._held:
            oldest = self._slowest() if self._open >= self.max_connections else None
            if oldest is not None:
                self._sending.pop(oldest.sock, None)
                oldest.evicted = True
                oldest.closed_why = (f"closed for a newer connection, every one of the "
                                     f"{self.max_connections} being taken, "
                                     f"{time.monotonic() - oldest.accepted:.1f} s after it "
                                     f"was accepted")
                try:
                    oldest.sock.shutdown(socket.SHUT_RDWR)  # its read or write ends at once
                except OSError:
                    pass
                self._held.wait_for(lambda: self._open < self.max_connections, _EVICT_WAIT)
            if self._open >= self.max_connections:
                return False
            self._open += 1
            self._sending[request] = self._connections[request] = _Connection(request, client)
            return True

    def _slowest(self) -> Optional[_Connection]:
        """The connection a new one may close (the lock held): the one sending its
        request the longest, else the one whose reply has waited on its client the
        longest, at least STALLED_GRACE; None when every one is being answered."""
        if self._sending:
            return next(iter(self._sending.values()))
        now = time.monotonic()
        stalled = [(connection.stalled_since, index, connection)
                   for index, connection in enumerate(self._connections.values())
                   if connection.stalled_since is not None and not connection.evicted
                   and now - connection.stalled_since >= STALLED_GRACE]
        return min(stalled)[2] if stalled else None

    def connection(self, request: Any) -> _Connection:
        with self._held:
            return self._connections.get(request) or _Connection(request)

    def request_read(self, request: Any) -> None:
        """``request`` arrived whole: it is being answered, no newer one closes it."""
        with self._held:
            self._sending.pop(request, None)

    def _release(self, request: Any) -> None:
        with self._held:
            self._sending.pop(request, None)
            connection = self._connections.pop(request, None)
            self._open -= 1
            self._held.notify_all()
            said = self._count_closed(connection) if connection is not None else None
        if said is not None:
            logger.warning("dashboard: closed %d slow or idle connection(s) since the last "
                           "such line (a client silent past a bound, not taking its reply, "
                           "or closed for a newer one); the last from %s: %s", *said)

    def _count_closed(self, connection: _Connection) -> Optional[Tuple[int, str, str]]:
        """Count ``connection`` if the server closed it unanswered (the lock held), and
        what to say if a line is due: one per CLOSED_SAID_EVERY seconds at most."""
        if not connection.closed_why:
            return None
        self._closed = getattr(self, "_closed", 0) + 1
        now = time.monotonic()
        said = getattr(self, "_closed_said", None)
        if said is not None and now - said < CLOSED_SAID_EVERY:
            return None
        count, self._closed, self._closed_said = self._closed, 0, now
        return count, connection.client, connection.closed_why

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (TimeoutError, ConnectionError, socket.timeout)):
            # a client silent past a bound, closed for a newer one, or gone: nothing
            # to print a traceback for
            logger.debug("dashboard: closed the connection from %s: %r", client_address[0], error)
            return
        super().handle_error(request, client_address)


class _Handler(WSGIRequestHandler):
    def setup(self) -> None:
        # as StreamRequestHandler.setup, through readers and writers that keep the bounds
        self.connection = self.request
        server: Any = self.server
        idle = getattr(server, "idle_timeout", IDLE_TIMEOUT)
        connection = server.connection(self.request)
        deadline = connection.accepted + getattr(server, "request_timeout", REQUEST_TIMEOUT)
        # a read past a bound ends the connection (ConnectionAbortedError: handle_error)
        self.rfile = io.BufferedReader(_RequestReader(connection, idle, deadline))
        self.wfile = _ReplyWriter(connection, idle,  # type: ignore[assignment]
                                  getattr(server, "response_timeout", RESPONSE_TIMEOUT))

    def handle(self) -> None:
        """As ``WSGIRequestHandler.handle``, with a form's body read (within the
        request deadline) before the page runs: a client still sending it is a
        client still sending its request."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error was sent
            return
        body: Any = self.rfile
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        if 0 < length <= MAX_BODY:  # a longer one is refused unread (413)
            body = io.BytesIO(self.rfile.read(length))
        getattr(self.server, "request_read", lambda request: None)(self.request)
        handler = ServerHandler(body, self.wfile, self.get_stderr(),  # type: ignore[arg-type]
                                self.get_environ(),
                                multithread=False)
        handler.request_handler = self  # type: ignore[attr-defined]
        handler.run(self.server.get_app())  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


def make(app: Minitask, host: str = "127.0.0.1", port: int = 5555,
         auth: Optional[str] = None, *, max_connections: int = MAX_CONNECTIONS,
         idle_timeout: float = IDLE_TIMEOUT, request_timeout: float = REQUEST_TIMEOUT,
         response_timeout: float = RESPONSE_TIMEOUT) -> WSGIServer:
    """A server for ``app``'s dashboard, bound and ready for ``serve_forever()``;
    port 0 picks a free one (``server.server_port``). ``max_connections``,
    ``idle_timeout``, ``request_timeout`` and ``response_timeout`` (seconds) bound
    the connections it holds (see the module's docstring)."""
    server: Any = make_server(host, port, Dashboard(app, auth, is_loopback(host)),
                              server_class=_Server, handler_class=_Handler)
    server.idle_timeout = idle_timeout
    server.request_timeout = request_timeout
    server.response_timeout = response_timeout
    server.max_connections = max_connections
    return server  # type: ignore[no-any-return]
