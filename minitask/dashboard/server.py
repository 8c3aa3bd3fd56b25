"""Serving the dashboard: the standard library's WSGI server, a thread per
connection (a slow page never holds up ``/metrics``), bound to 127.0.0.1 unless
told otherwise.

Connections are bounded: at most ``MAX_CONNECTIONS`` are served at once (one
more is closed at once, unanswered), and one that sends nothing for
``IDLE_TIMEOUT`` seconds (a client gone half-open, or one that never finishes
its request) is closed, so that its thread ends.
"""
from __future__ import annotations

import logging
import socketserver
import sys
import threading
from typing import Any, Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..app import Minitask
from .web import Dashboard, is_loopback

logger = logging.getLogger(__name__)

#: Connections served at once; each holds a thread.
MAX_CONNECTIONS = 64
#: Seconds a connection may stay silent (reading its request, or between requests).
IDLE_TIMEOUT = 10.0


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    #: The bounds, set by ``make``.
    idle_timeout = IDLE_TIMEOUT
    max_connections = MAX_CONNECTIONS
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            logger.warning("dashboard: %d connections are open already; closed one from %s",
                           self.max_connections, client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started: none will release it
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (TimeoutError, ConnectionError)):
            # a client silent past the idle bound, or gone: nothing to print a traceback for
            logger.debug("dashboard: closed the connection from %s: %r", client_address[0], error)
            return
        super().handle_error(request, client_address)


class _Handler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        # a read that waits longer ends the connection (TimeoutError: handle_error)
        self.connection.settimeout(getattr(self.server, "idle_timeout", IDLE_TIMEOUT))

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


def make(app: Minitask, host: str = "127.0.0.1", port: int = 5555,
         auth: Optional[str] = None, *, max_connections: int = MAX_CONNECTIONS,
         idle_timeout: float = IDLE_TIMEOUT) -> WSGIServer:
    """A server for ``app``'s dashboard, bound and ready for ``serve_forever()``;
    port 0 picks a free one (``server.server_port``). ``max_connections`` and
    ``idle_timeout`` (seconds) bound the connections it holds."""
    server: Any = make_server(host, port, Dashboard(app, auth, is_loopback(host)),
                              server_class=_Server, handler_class=_Handler)
    server.idle_timeout = idle_timeout
    server.max_connections = max_connections
    server.slots = threading.BoundedSemaphore(max_connections)
    return server  # type: ignore[no-any-return]
