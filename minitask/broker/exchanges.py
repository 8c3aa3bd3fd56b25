"""A round trip on a thread's own connection: packed commands written in one write,
their replies read in order (the transport's ``_send_packed`` and ``send_commands``).

On a plain socket whose replies hiredis parses (redis-py's parser built on
``hiredis.Reader``), the bytes go straight to the socket and the replies come
straight from the reader, as redis-py's ``send_packed_command`` and
``read_response`` would give them, without their seven Python calls a round trip
(its host named, its health checked, its parser's two levels) nor the poll() a
socket with a timeout makes before each send: one call's write is tried first
on its descriptor (non-blocking under a timeout), and only what does not fit waits
for room, through the socket's own send and its timeout (several calls, or a WAIT
behind: counted, ``write_counted``). redis-py's health check is
kept (a PING first when the connection was idle its interval). Any other
connection (TLS, a test double, redis-py's own parser) goes through redis-py.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import redis

from .writes import WriteFailed, closed_after, write_counted

__all__ = ["exchange", "buffered"]

#: What redis-py's parsers say when the server closed the connection.
_CLOSED = "Connection closed by server."


def exchange(connection: Any, data: bytes, count: int,
             ends: Optional[List[int]] = None) -> List[Any]:
    """Write ``data`` (``count`` packed commands) in one write and read their
    ``count`` replies, in order; a command Redis refused has its ResponseError in
    its place, and the replies after it are read all the same (the connection
    stays in step). Any other failure leaves the connection half read: the
    caller disconnects it; a failed write raises ``WriteFailed``: nothing after the
    cut reached Redis, so the last command never ran; those before it may have
    (``ends``, the offset where each command ends: counted in ``whole``)."""
    reader, short, push = buffered(connection)
    if reader is not None and type(getattr(connection, "_sock", None)) is socket.socket:
        buffer = getattr(connection._parser, "_buffer", None)
        if type(buffer) is bytearray and buffer:
            interval = getattr(connection, "health_check_interval", 0)
            if interval and time.monotonic() > connection.next_health_check:
                _check_health(connection)  # (a PING first, as redis-py's send does)
                reader, short, push = buffered(connection)  # (a new connection's)
            sock = connection._sock
            if reader is not None and type(sock) is socket.socket:
                if ends is not None:  # several calls, or a WAIT behind: counted
                    write_counted(connection, data, ends)
                else:
                    try:  # (the whole round trip written out: no Python call)
                        done = os.write(sock.fileno(), data)
                    except OSError:  # no room (or a failure: the socket's send says which)
                        done = 0
                    if done < len(data):
                        _write_rest(connection, sock, data, done)
                buffer = connection._parser._buffer
                replies: List[Any] = []
                for _ in range(count):
                    reply = reader.gets()
                    while reply is short:
                        try:
                            got = sock.recv_into(buffer)
                        except OSError as exc:
                            raise _read_failed(connection, exc) from exc
                        if not got:
                            raise redis.ConnectionError(_CLOSED)
                        reader.feed(buffer, 0, got)
                        reply = reader.gets()
                    if type(reply) is list:  # (a script's array: ``_checked``'s look, inline)
                        if reply and isinstance(reply[0], redis.ConnectionError):
                            raise reply[0]
                    elif type(reply) not in _PLAIN:
                        try:
                            reply = _checked(connection, reply, short, push)
                        except redis.ResponseError as exc:
                            replies.append(exc)
                            if closed_after(exc):  # no reply follows: those after never ran
                                replies += [exc] * (count - len(replies))
                                break
                            continue
                    replies.append(reply)
                if interval:  # (as redis-py's read_response notes it)
                    connection.next_health_check = time.monotonic() + interval
                return replies
    try:
        if ends is None:
            connection.send_packed_command([data])
        else:
            write_counted(connection, data, ends)
    except WriteFailed:
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:  # (connecting, or writing)
        raise WriteFailed(*exc.args) from exc
    if count == 1:
        reader = None
    replies = []
    for _ in range(count):
        try:
            reply = short if reader is None else reader.gets()
            if reply is short:  # nothing parsed yet: read the socket, redis-py's way
                reply = connection.read_response()
            elif type(reply) not in _PLAIN:
                reply = _checked(connection, reply, short, push)
            replies.append(reply)
        except redis.ResponseError as exc:
            replies.append(exc)
            if closed_after(exc):  # no reply follows: the commands after it never ran
                replies += [exc] * (count - len(replies))
                break
    return replies


def _check_health(connection: Any) -> None:
    """redis-py's health check (a PING when the connection has been idle its
    interval); its failure, before anything is written, is a ``WriteFailed``."""
    try:
        connection.check_health()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise WriteFailed(*exc.args) from exc


def _write_rest(connection: Any, sock: socket.socket, data: bytes, done: int) -> None:
    """The rest of one call's ``data`` (``done`` bytes of it written), by the socket's
    send, which waits for room within its timeout. A failure disconnects and raises
    ``WriteFailed``: a call cut short never runs."""
    size = len(data)
    view = memoryview(data)
    try:
        while done < size:
            done += sock.send(view[done:])
    except OSError as exc:  # (socket.timeout included)
        connection.disconnect()
        raise WriteFailed(f"Error writing to {getattr(connection, 'host', 'Redis')}: "
                          f"{exc} ({done:,} of {size:,} bytes written)") from exc


def _read_failed(connection: Any, exc: OSError) -> redis.RedisError:
    """A failed read of a reply, as redis-py's ``read_response`` words it."""
    if isinstance(exc, socket.timeout):
        return redis.TimeoutError(f"Timeout reading from {_named(connection)}")
    return redis.ConnectionError(f"Error while reading from {_named(connection)} : {exc.args}")


def _named(connection: Any) -> str:
    """The server, as redis-py names it in its errors."""
    try:
        return str(connection._host_error())
    except Exception:  # noqa: BLE001 (a connection class of another shape)
        return str(getattr(connection, "host", "Redis"))


#: The types of a reply that needs no look: redis-py's ``read_response`` returns them
#: as hiredis parsed them.
_PLAIN = frozenset({bytes, str, int, float, type(None)})
#: The "not enough data" mark of each redis-py parser class's hiredis reader, by class.
_SHORT: Dict[type, Any] = {}


def buffered(connection: Any) -> Tuple[Any, Any, Any]:
    """The connection's hiredis reader, its "not enough data" mark and the type of a
    RESP3 push message (None: none), or (None, None, None): read the usual way.

    The replies of commands written together mostly arrive in one read: redis-py's
    ``read_response`` (three calls, a description of the host formatted, per reply)
    reads the first, the rest are taken from the reader's buffer as they are, checked
    as ``read_response`` checks them (``_checked``). Only for a parser built on
    hiredis's ``Reader`` whose mark no reply can be (redis-py 5+'s; 4.x's is False,
    which a RESP3 reply can be).
    """
    parser = getattr(connection, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if reader is None:
        return None, None, None
    kind = type(parser)
    if kind not in _SHORT:
        _SHORT[kind] = getattr(sys.modules.get(kind.__module__), "NOT_ENOUGH_DATA", False)
    short = _SHORT[kind]
    if short is False and getattr(connection, "protocol", 2) in (3, "3"):
        return None, None, None
    return reader, short, getattr(parser, "_hiredis_PushNotificationType", None)


def _checked(connection: Any, reply: Any, short: Any, push: Any) -> Any:
    """A reply taken from the reader's buffer, as redis-py's ``read_response`` would
    give it: a RESP3 push message handed to redis-py (the reply is the next), an
    error reply raised (a ConnectionError kind too, or first in an array)."""
    while push is not None and isinstance(reply, push):
        connection._parser.handle_push_response(reply)
        reply = connection._parser._reader.gets()
        if reply is short:
            return connection.read_response()
    if isinstance(reply, (redis.ConnectionError, redis.ResponseError)):
        raise reply
    if type(reply) is list and reply and isinstance(reply[0], redis.ConnectionError):
        raise reply[0]
    return reply
