"""A cancel landing while the asyncio pool's loop reads the reply of its round trip
(worker/loop_acks.py ``LoopLink.exchange``) must not throw that reply away: the
command may have run (an ack written, tasks leased). Without hiredis, redis-py's
``read_response`` closed the connection on the cancel, and the round trip ended
"failed" although its command had run: the outcome was recorded twice, and the
tasks its fetch leased stayed leased to nobody."""
from __future__ import annotations

import asyncio
from typing import Any, Tuple

import pytest
import redis
import redis.asyncio
from redis._parsers import _AsyncRESP2Parser

from minitask.worker.loop_acks import Cancelled, LoopLink
from tests.support.parsers import PARSERS, pack, use_parser
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: INCR, then busy for ``ARGV[1]`` microseconds: a command that has run long before
#: its reply comes
SLOW = b"""redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1])
return 'done'"""
ATTEMPTS = 3


@pytest.mark.parametrize("parser", PARSERS)
def test_a_cancel_inside_the_read_still_gets_the_reply(
        parser: str, redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, parser)
    host, port = "127.0.0.1", redis_server.port
    command = pack(b"EVAL", SLOW, b"1", b"ran", b"500000")

    def connection() -> redis.asyncio.Connection:
        if parser == "hiredis":
            return redis.asyncio.Connection(host=host, port=port)
        return redis.asyncio.Connection(host=host, port=port, parser_class=_AsyncRESP2Parser)

    async def main() -> Tuple[Any, Any]:
        link = LoopLink(connection, 30.0)
        try:
            assert await link.exchange(pack(b"PING")) == b"PONG"  # connected: no connect to cancel
            for _ in range(ATTEMPTS):  # (a loop stalled past the script's end: try again)
                round_trip = asyncio.ensure_future(link.exchange(command))
                await asyncio.sleep(0.05)  # written, its reply 0.5 s away: inside the read
                round_trip.cancel()
                try:
                    await asyncio.wait_for(round_trip, 30)
                except Cancelled as ended:
                    return ended, await link.exchange(pack(b"PING"))
            raise AssertionError("the cancel never landed inside the read")
        finally:
            await link.close()

    ended, after = asyncio.run(main())
    assert ended.error is None, ended.error
    assert ended.reply == b"done"
    assert int(admin.get("ran") or 0) >= 1
    assert after == b"PONG"  # the connection stayed in step
