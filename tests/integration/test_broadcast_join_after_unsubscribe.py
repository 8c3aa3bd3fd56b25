"""A subscriber that ran a broadcast call and then unsubscribed (``minitask
unsubscribe``) is still joinable on that call, by name and in ``join()``'s default;
a name that never subscribed is still refused. Real redis-server, real subscribers
(burst workers) and the real command."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Dict

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask.cli.main import main
from tests.apps.broadcast import QUEUE
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "tests.apps.broadcast"


def test_a_subscriber_that_ran_the_call_is_joinable_after_it_unsubscribed(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = Minitask("bcast", broker=redis_server.client())  # the app of tests.apps.broadcast

    @app.task(name="joined.double", broadcast=True, queue=QUEUE)
    def double(n: int) -> int:
        return 2 * n

    try:
        for name in ("s1", "s2"):
            app.worker(queues=[QUEUE], subscriber=name, burst=True).starting()
        handle = double.delay(21)
        for name in ("s1", "s2"):
            app.worker(queues=[QUEUE], subscriber=name, burst=True).run()
        assert handle.join(timeout=10) == {"s1": 42, "s2": 42}
        assert main(["unsubscribe", "-A", APP, QUEUE, "s1"]) == 0
        assert handle.subscribers() == ["s2"]  # who is subscribed and got it

        assert handle.join(subscribers=["s1"], timeout=10) == {"s1": 42}
        assert handle.join(subscribers=["s1", "s1"], timeout=10) == {"s1": 42}
        assert handle.join(timeout=10) == {"s1": 42, "s2": 42}

        async def ajoin(**options: Any) -> Dict[str, Any]:
            try:
                return await handle.ajoin(timeout=10, **options)
            finally:
                await app.aclose()

        assert asyncio.run(ajoin(subscribers=["s1"])) == {"s1": 42}
        assert asyncio.run(ajoin()) == {"s1": 42, "s2": 42}

        started = time.monotonic()
        with pytest.raises(ConfigurationError, match="'ghost' never got this call"):
            handle.join(subscribers=["ghost"])  # no timeout: refused, never waited for
        assert time.monotonic() - started < 10
    finally:
        app.close()


def test_one_unsubscribed_before_it_pulled_the_call_is_refused_by_name(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = Minitask("bcast", broker=redis_server.client())

    @app.task(name="joined.double", broadcast=True, queue=QUEUE)
    def double(n: int) -> int:
        return 2 * n

    try:
        app.worker(queues=[QUEUE], subscriber="s1", burst=True).starting()
        handle = double.delay(1)
        assert main(["unsubscribe", "-A", APP, QUEUE, "s1"]) == 0
        with pytest.raises(ConfigurationError, match="unsubscribed before pulling it"):
            handle.join(subscribers=["s1"])  # its run will never come: not waited for
        assert handle.join(timeout=10) == {}
    finally:
        app.close()
