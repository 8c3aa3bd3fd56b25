"""An asyncio send Redis refused inside a script is told as the blocking one is: a full
Redis (maxmemory, noeviction) is reason "out of memory" with what Redis said and how to
fix it. Before, every async refusal read reason "error" and "check that the server is
running and reachable", which sent an operator looking for an outage."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterator

import pytest
import redis
import redis.asyncio

from minitask import BrokerError, Minitask
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()  # this test's own: it is made full


@pytest.fixture
def admin(server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    client = server.client()
    client.config_set("maxmemory-policy", "noeviction")
    try:
        yield client
    finally:
        client.close()


def refused(app: Minitask, admin: Any,
            send: Callable[[Minitask], Awaitable[Any]]) -> BrokerError:
    """``send``'s error on a full Redis (the scripts loaded before it is made full)."""
    async def run() -> BrokerError:
        await app.tasks["job"].adelay(0)  # the scripts are loaded: only the write is refused
        await app.tasks["job"].adelay_many([(1,), (2,)])
        keys = sorted(admin.keys("*"))
        admin.config_set("maxmemory", 1)
        try:
            with pytest.raises(BrokerError) as caught:
                await send(app)
        finally:
            admin.config_set("maxmemory", 0)
            await app.aclose()
        assert sorted(admin.keys("*")) == keys  # nothing of the refused send was written
        return caught.value
    return asyncio.run(run())


def check_out_of_memory(error: BrokerError) -> None:
    said = str(error)
    assert error.reason == "out of memory", said
    assert "command not allowed when used memory" in said  # what Redis said
    assert "raise maxmemory" in said and "noeviction" in said  # and how to fix it
    assert "reachable" not in said and "server is running" not in said
    assert "script: " not in said  # (the script's sha and line tell a reader nothing)
    assert error.sent is False  # Redis answered: nothing was written


def app_on(url: str, **options: Any) -> Minitask:
    app = Minitask("fullasync", broker=url, **options)
    app.task(name="job")(lambda n: n)
    app.task(name="limited", rate_limit="1000/s")(lambda n: n)
    return app


@pytest.mark.parametrize("send", [
    pytest.param(lambda app: app.tasks["job"].adelay(1), id="adelay"),
    pytest.param(lambda app: app.tasks["job"].adelay_many([(n,) for n in range(5)]),
                 id="adelay_many"),
    pytest.param(lambda app: app.tasks["job"].aapply_in(30, 1), id="aapply_in"),
    pytest.param(lambda app: app.tasks["limited"].adelay(1), id="flow-controlled"),
])
def test_a_full_redis_refusing_an_async_send_says_so(
        server: RedisServer, admin: Any, send: Callable[[Minitask], Awaitable[Any]]) -> None:
    check_out_of_memory(refused(app_on(server.url), admin, send))


def test_a_full_redis_refusing_a_confirmed_async_send_says_so(
        server: RedisServer, admin: Any) -> None:
    """A send replicas confirm (the script, its touch and WAIT in one write): the
    script's refusal is told, not the WAIT that could not follow."""
    app = app_on(server.url)  # (the set-up's sends unconfirmed: no replica here)
    error = refused(app, admin, lambda app: app.tasks["job"].aapply_async(
        (1,), durability="replicated"))
    check_out_of_memory(error)


def test_a_full_redis_refusing_through_a_client_of_ones_own_says_so(
        server: RedisServer, admin: Any) -> None:
    """``async_broker=`` a client of the app's own making (redis-py's EVALSHA path)."""
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, single_connection_client=True)
    app = app_on(server.url, async_broker=client)
    check_out_of_memory(refused(app, admin, lambda app: app.tasks["job"].adelay(1)))
