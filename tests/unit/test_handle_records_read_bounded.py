"""A handle record is read at most ``HANDLE_BYTES`` + 1 bytes at a time (GETRANGE):
one larger (a planted 59 MB record took 2.7 GB and 138 s, then blamed Redis's
reachability) is refused naming the group id, the key and the limit, in both
twins; a group minitask wrote is rebuilt as before."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import fakeredis
import pytest
import redis

from minitask import ConfigurationError, GroupHandle, Minitask, group
from minitask.errors import DecodeError
from minitask.stores.workflow_reads import HANDLE_BYTES
from tests.support.clock import ManualClock


def test_a_handle_record_larger_than_handle_bytes_is_refused_naming_the_id_and_limit(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app()
    add = app.task(name="add")(lambda a, b: a + b)
    sent = group(add.s(1, 1), add.s(2, 2)).delay()
    assert isinstance(app.group_handle(sent.id), GroupHandle)  # one minitask wrote
    key = app.broker.results.keys("default").handle("hbig")
    redis_client.set(key, b"\x91" + b"\xc0" * (HANDLE_BYTES + 10))
    with pytest.raises(ConfigurationError, match=f"group 'hbig' cannot be rebuilt: the handle "
                                                 f"record .*hbig is larger than "
                                                 f"{HANDLE_BYTES:,} bytes"):
        app.group_handle("hbig")
    with pytest.raises(DecodeError, match=f"larger than {HANDLE_BYTES:,} bytes"):
        app.handle("hbig").get(timeout=1)


def test_the_async_twin_reads_a_handle_record_bounded_too(clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    app = Minitask("test", broker=fakeredis.FakeRedis(server=server),
                   async_broker=fakeredis.FakeAsyncRedis(server=server), clock=clock)
    app.task(name="add")(lambda a, b: a + b).delay(1, 2)  # the queue exists
    key = app.broker.results.keys("default").handle("hbig")
    app.broker.client.set(key, b"\x91" + b"\xc0" * (HANDLE_BYTES + 10))

    async def aget() -> Any:
        try:
            return await app.handle("hbig").aget(timeout=1)
        finally:
            await app.aclose()

    with pytest.raises(DecodeError, match=f"larger than {HANDLE_BYTES:,} bytes"):
        asyncio.run(aget())
