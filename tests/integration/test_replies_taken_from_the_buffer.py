"""Commands written together have their replies read once from the socket, the rest
taken from hiredis's buffer as they are (``transport._exchange``): a plain ``delay()``
makes one redis-py ``read_response``, not one per reply, and every reply is what
redis-py's ``read_response`` would have given — error replies in their place (the
replies after them read all the same), an error inside EXEC's array, a RESP3 push
message handed to redis-py between two replies. On the suite's own redis-server.
"""
from __future__ import annotations

from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker import transport
from minitask.broker.packing import command

from tests.support.servers import RedisServer


@pytest.fixture
def app(redis_server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("buffered", broker=redis_server.url)
    yield app
    app.close()


def _counting(connection: Any) -> List[int]:
    counted = [0]
    read = connection.read_response

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return read(*args, **kwargs)

    connection.read_response = counting
    return counted


def test_a_plain_delay_reads_its_replies_with_one_read_response(app: Minitask) -> None:
    @app.task(name="buffered.job")
    def job(n: int) -> int:
        return n

    job.delay(0)  # connects, registers the queue
    job.delay(0)  # asks whether MULTI/EXEC may be used (once)
    connection = app.broker.transport.connections.own()
    counted = _counting(connection)
    try:
        handles = [job.delay(n) for n in range(1, 4)]
    finally:
        del connection.read_response
    # MULTI, HSET, RPUSH, RPUSH, EXEC: five replies each, the first read from the socket
    assert counted[0] == 3
    assert [h.status() for h in handles] == ["queued"] * 3


#: Replies that need a look: an error among plain ones, an error inside EXEC's array.
MIXED = (command("SET", "k", "v"), command("LPUSH", "k", "x"), command("GET", "k"),
         command("MULTI"), command("INCR", "k"), command("SET", "n", "1"), command("EXEC"),
         command("PING"))


def _replies(app: Minitask, buffered: bool) -> List[Any]:
    connection = app.broker.transport.connections.own()
    connection.send_command("DEL", "k", "n")
    connection.read_response()
    if not buffered:  # redis-py's read_response for every reply, as before
        original, transport._buffered = transport._buffered, lambda c: (None, None, None)
    try:
        return transport._exchange(connection, b"".join(MIXED), len(MIXED))
    finally:
        if not buffered:
            transport._buffered = original


def _shown(replies: List[Any]) -> List[Any]:
    return [[_shown([r])[0] for r in reply] if isinstance(reply, list)
            else (type(reply), str(reply)) if isinstance(reply, Exception) else reply
            for reply in replies]


def test_error_replies_are_in_their_place_as_redis_py_gives_them(app: Minitask) -> None:
    buffered, plain = _replies(app, True), _replies(app, False)
    assert _shown(buffered) == _shown(plain)
    assert isinstance(buffered[1], redis.ResponseError) and "WRONGTYPE" in str(buffered[1])
    assert isinstance(buffered[6][0], redis.ResponseError)  # INCR of "v", inside EXEC
    assert buffered[6][1] in (b"OK", "OK") and buffered[7] in (b"PONG", "PONG", True)
    # the connection is in step: the next command gets its own reply
    assert app.broker.transport.connections.call("GET", "n") == b"1"


def test_a_push_message_between_replies_goes_to_redis_py(redis_server: RedisServer) -> None:
    connection = redis.Connection(host="127.0.0.1", port=redis_server.port, protocol=3)
    connection.connect()
    pushed: List[Any] = []
    parser = connection._parser
    if getattr(parser, "_hiredis_PushNotificationType", None) is None:
        pytest.skip("a parser without hiredis push messages")
    parser.set_invalidation_push_handler(pushed.append)
    try:
        # the SET invalidates the key the GET made this client track: a push message
        # comes between its reply and PING's
        packed = [command("CLIENT", "TRACKING", "ON"), command("GET", "tracked"),
                  command("SET", "tracked", "1"), command("PING")]
        replies = transport._exchange(connection, b"".join(packed), len(packed))
    finally:
        connection.disconnect()
    assert replies[:3] == [b"OK", None, b"OK"] and replies[3] in (b"PONG", "PONG")
    assert pushed and b"tracked" in repr(pushed).encode()
