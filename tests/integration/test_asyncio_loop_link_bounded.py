"""The asyncio pool's loop opens at most ``most`` connections to Redis for the outcomes
it records (worker/loop_acks.py ``LoopLink``), however many of its attempts end at
once: the others wait for one to come free, in turn. A pool of 10,000 slots whose
attempts all ended together would otherwise open 10,000 connections."""
from __future__ import annotations

import asyncio
from typing import Callable, List

import redis
import redis.asyncio

from minitask.worker.loop_acks import MOST_LINKS, LoopLink
from tests.support.servers import RedisServer

PING = b"*1\r\n$4\r\nPING\r\n"


def test_many_round_trips_at_once_share_a_few_connections(
        start_redis: Callable[..., RedisServer]) -> None:
    server = start_redis()
    host, port = "127.0.0.1", server.port
    watcher = redis.Redis(host=host, port=port)
    before = len(watcher.client_list())
    most: List[int] = []

    async def main() -> List[object]:
        link = LoopLink(lambda: redis.asyncio.Connection(host=host, port=port), 10.0, most=3)

        async def one() -> object:
            reply = await link.exchange(PING)
            most.append(link._open)
            return reply

        try:
            return list(await asyncio.gather(*(one() for _ in range(200))))
        finally:
            most.append(len(watcher.client_list()) - before)
            await link.close()

    replies = asyncio.run(main())
    assert replies == [b"PONG"] * 200
    assert max(most) <= 3, most
    assert MOST_LINKS <= 16  # (the pool's own bound stays a handful)
    watcher.close()


async def served_on(link: LoopLink) -> object:
    """A PING's reply once the link served a test's round trips. The reply to a QUIT
    is read whole, so its connection is kept, though Redis closes it: the next round
    trip on it fails (and drops it). Which connections a QUIT closed, and which is
    used next, depends on the order the loop ran the round trips in: one round trip
    more than ``most`` (2 here) meets a live one."""
    failed: List[BaseException] = []
    for _ in range(3):
        try:
            return await asyncio.wait_for(link.exchange(PING), 10)
        except (ConnectionError, OSError, redis.ConnectionError) as exc:
            failed.append(exc)
    raise AssertionError(f"the link served no PING after the round trips: {failed}")


def test_round_trips_waiting_for_a_connection_are_served_when_others_fail(
        start_redis: Callable[..., RedisServer]) -> None:
    """Error replies keep their connection; a connection that fails (Redis closed it:
    QUIT) leaves its room to a waiting round trip, which opens its own. None waits for
    ever (it did: a failed connection woke nobody, and its waiters hung)."""
    server = start_redis()
    host, port = "127.0.0.1", server.port
    unknown = b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + b"0" * 40 + b"\r\n$1\r\n0\r\n"
    quit_command = b"*1\r\n$4\r\nQUIT\r\n"

    async def main() -> List[object]:
        link = LoopLink(lambda: redis.asyncio.Connection(host=host, port=port), 10.0, most=2)
        commands = [(unknown, quit_command, PING)[index % 3] for index in range(60)]
        try:
            replies = list(await asyncio.wait_for(asyncio.gather(
                *(link.exchange(command) for command in commands), return_exceptions=True),
                60))
            return replies + [await served_on(link)]
        finally:
            await link.close()

    *replies, after = asyncio.run(main())
    assert len(replies) == 60
    refused = [reply for reply in replies if isinstance(reply, redis.ResponseError)]
    assert refused and all("NOSCRIPT" in str(reply) for reply in refused)
    assert b"OK" in replies and after == b"PONG"
    for reply in replies:  # each a reply, an error reply, or its connection's failure
        assert reply in (b"PONG", b"OK") or isinstance(reply, (redis.ResponseError,
                                                               ConnectionError, OSError)), reply
