"""The asyncio pool's loop round trips (worker/loop_acks.py ``LoopLink``) pair each
command with its own reply: a RESP3 push message (redis-py 8 speaks RESP3 by default;
CLIENT TRACKING's invalidations, say) was taken as the next command's reply, and every
reply after it answered the command before its own, so the loop's connections speak
RESP2 and a push that comes anyway is passed over. A connection Redis closed while
idle (CLIENT KILL, its ``timeout``) is not sent the next command: that round trip
failed though nothing had been sent, its acks went to the recording threads and the
loop rested a second. A round trip past its timeout says so."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, List

import pytest
import redis
import redis.asyncio
from redis.exceptions import ResponseError

from minitask import Minitask

from minitask.worker.loop_acks import LoopLink, link_for
from tests.support.parsers import PARSERS, pack, use_parser
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


async def _invalidated(link: LoopLink, admin: "redis.Redis[bytes]") -> List[Any]:
    """Track key ``k`` on one of ``link``'s connections, change it from elsewhere (an
    invalidation push to that connection, in RESP3), then two round trips."""
    try:
        await link.exchange(pack(b"CLIENT", b"TRACKING", b"ON"))
    except ResponseError:
        pass  # (RESP2 without REDIRECT: no invalidations are sent either way)
    await link.exchange(pack(b"GET", b"k"))
    admin.set(b"k", b"1")
    await asyncio.sleep(0.2)  # the push is there before the next command
    replies = [await link.exchange(pack(b"PING", b"one")),
               await link.exchange(pack(b"PING", b"two"))]
    info = await link.exchange(pack(b"CLIENT", b"INFO"))
    await link.close()
    return replies + [b" resp=" + info.split(b" resp=")[1].split()[0]]


@pytest.mark.parametrize("given", ["client", "url"])
@pytest.mark.parametrize("parser", PARSERS)
def test_the_loops_connections_pair_each_command_with_its_reply_though_pushes_come(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", parser: str, given: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, parser)
    # (a URL's client has no ``protocol`` among its connections' arguments)
    broker: Any = redis_server.url if given == "url" else redis.Redis(
        host="127.0.0.1", port=redis_server.port)
    app = Minitask("pushes", broker=broker)
    try:
        link = link_for(SimpleNamespace(broker=app.broker))  # type: ignore[arg-type]
        assert link is not None
        assert asyncio.run(_invalidated(link, admin)) == [b"one", b"two", b" resp=2"]
    finally:
        app.close()


def test_a_push_on_a_resp3_connection_answers_no_command(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    hiredis = pytest.importorskip("hiredis")
    if not hasattr(hiredis, "PushNotification"):
        pytest.skip("hiredis before 3 gives a push as a list: RESP2 alone keeps it away")
    link = LoopLink(lambda: redis.asyncio.Connection(
        host="127.0.0.1", port=redis_server.port, protocol=3), 10.0)
    assert asyncio.run(_invalidated(link, admin)) == [b"one", b"two", b" resp=3"]


@pytest.mark.parametrize("parser", PARSERS)
def test_a_connection_closed_while_idle_is_not_sent_the_next_command(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", parser: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, parser)
    app = Minitask("idle", broker=redis.Redis(host="127.0.0.1", port=redis_server.port))

    async def main() -> List[Any]:
        link = link_for(SimpleNamespace(broker=app.broker))  # type: ignore[arg-type]
        assert link is not None
        try:
            assert await link.exchange(pack(b"PING")) == b"PONG"
            admin.client_kill_filter(_type="normal", skipme=True)  # the idle connection
            await asyncio.sleep(0.2)  # its end seen by the loop
            return [await link.exchange(pack(b"INCR", b"n")), link._open]
        finally:
            await link.close()

    try:
        assert asyncio.run(main()) == [1, 1]  # served, on a new connection, the old gone
    finally:
        app.close()
    assert admin.get("n") == b"1"


@pytest.mark.parametrize("parser", PARSERS)
def test_a_round_trip_past_its_timeout_says_it_timed_out(
        redis_server: RedisServer, parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, parser)

    async def main() -> BaseException:
        link = LoopLink(lambda: redis.asyncio.Connection(
            host="127.0.0.1", port=redis_server.port), 0.5)
        try:
            await link.exchange(pack(b"BLPOP", b"never", b"5"))
        except Exception as exc:
            return exc
        finally:
            await link.close()
        raise AssertionError("the BLPOP outlived its round trip's timeout")

    failure = asyncio.run(main())
    assert isinstance(failure, TimeoutError), repr(failure)  # (an OSError, as before)
    assert "0.5 s" in str(failure) and "socket_timeout" in str(failure), str(failure)
