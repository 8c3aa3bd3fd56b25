"""aget()'s waits block on at most as many connections at once as their pool holds;
on a client they must share (a custom class, a cluster), at most 50 or half of its
pool, as the blocking get()'s (issue 29, part 3). No server: nothing connects."""
from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio

from minitask.stores.aio_clients import AsyncResultWaits


class _Custom(redis.asyncio.Redis):
    """A client class minitask cannot mirror: its waits share its pool."""


def _most_at_once(waits: AsyncResultWaits) -> int:
    gate: Any = waits._gate
    return int(gate._value)


def test_waits_of_a_mirrored_client_block_on_as_many_connections_as_its_pool() -> None:
    async def made() -> int:
        client = redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(
            host="127.0.0.1", port=1, max_connections=7))
        waits = AsyncResultWaits(client)
        assert waits.waits is not client
        assert waits.waits.connection_pool.max_connections == 7
        return _most_at_once(waits)

    assert asyncio.run(made()) == 7


def test_waits_sharing_a_client_take_at_most_half_its_pool_and_never_over_50() -> None:
    async def made(size: int) -> int:
        client = _Custom(connection_pool=redis.asyncio.ConnectionPool(
            host="127.0.0.1", port=1, max_connections=size))
        waits = AsyncResultWaits(client)
        assert waits.waits is client
        return _most_at_once(waits)

    assert [asyncio.run(made(size)) for size in (1, 30, 1000)] == [1, 15, 50]
