"""With hiredis, the asyncio pool's loop parses the replies of its round trips as
their bytes come (worker/loop_acks.py ``Replies``, in place of the stream redis-py's
connect made): a reply in many pieces is read whole, an error reply is the round
trip's error and leaves the connection in step, and a connection Redis closes while
a round trip waits ends that round trip at once, the next one served on a new one."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Tuple

import pytest
import redis
import redis.asyncio
from redis.exceptions import ResponseError

from minitask.worker.loop_acks import LoopLink, Replies
from tests.support.parsers import pack
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Bytes of the long value: many reads of the socket, many pieces for the parser.
LONG = 3 * 1024 * 1024


def link_to(server: RedisServer) -> LoopLink:
    pytest.importorskip("hiredis")
    return LoopLink(lambda: redis.asyncio.Connection(host="127.0.0.1", port=server.port),
                    30.0)


def run(server: RedisServer, main: Callable[[LoopLink], Any]) -> Any:
    async def whole() -> Any:
        link = link_to(server)
        try:
            return await main(link)
        finally:
            await link.close()
    return asyncio.run(whole())


def test_a_long_reply_in_many_pieces_is_read_whole(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    value = bytes(range(256)) * (LONG // 256)
    admin.set("long", value)

    async def main(link: LoopLink) -> Tuple[Any, Any, bool]:
        reply = await link.exchange(pack(b"GET", b"long"))
        return reply, await link.exchange(pack(b"PING")), isinstance(
            link._free[0][3], Replies)

    reply, after, parsed_as_they_come = run(redis_server, main)
    assert parsed_as_they_come
    assert reply == value
    assert after == b"PONG"


def test_an_error_reply_is_raised_and_the_connection_stays_in_step(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    admin.set("text", b"not a number")

    async def main(link: LoopLink) -> Tuple[Any, Any, int]:
        try:
            await link.exchange(pack(b"INCR", b"text"))
        except ResponseError as exc:
            error: Any = exc
        else:
            error = None
        return error, await link.exchange(pack(b"INCR", b"counter")), link._open

    error, after, opened = run(redis_server, main)
    assert isinstance(error, ResponseError) and "not an integer" in str(error), error
    assert after == 1
    assert opened == 1  # the same connection served both


def test_a_connection_closed_while_a_round_trip_waits_ends_it_at_once(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    async def main(link: LoopLink) -> Tuple[Any, float, Any]:
        assert await link.exchange(pack(b"PING")) == b"PONG"  # connected
        waiting = asyncio.ensure_future(link.exchange(pack(b"BLPOP", b"never", b"20")))
        for _ in range(200):  # until Redis holds it blocked
            await asyncio.sleep(0.01)
            if any(client.get("cmd") == "blpop" for client in admin.client_list()):
                break
        killed = time.monotonic()
        admin.client_kill_filter(_type="normal", skipme=True)
        try:
            await asyncio.wait_for(waiting, 10)
        except Exception as exc:
            ended: Any = exc
        else:
            ended = None
        took = time.monotonic() - killed
        return ended, took, await link.exchange(pack(b"PING"))

    ended, took, after = run(redis_server, main)
    assert isinstance(ended, (ConnectionError, OSError)), repr(ended)
    assert took < 5, took  # not the BLPOP's 20 s, nor the round trip's 30 s timeout
    assert after == b"PONG"  # served on a new connection
