"""Serving the dashboard: the standard library's WSGI server, a thread per
request (a slow page never holds up ``/metrics``), bound to 127.0.0.1 unless
told otherwise."""
from __future__ import annotations

import logging
import socketserver
from typing import Any, Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..app import Minitask
from .web import Dashboard, is_loopback

logger = logging.getLogger(__name__)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


def make(app: Minitask, host: str = "127.0.0.1", port: int = 5555,
         auth: Optional[str] = None) -> WSGIServer:
    """A server for ``app``'s dashboard, bound and ready for ``serve_forever()``;
    port 0 picks a free one (``server.server_port``)."""
    return make_server(host, port, Dashboard(app, auth, is_loopback(host)), server_class=_Server,
                       handler_class=_Handler)
