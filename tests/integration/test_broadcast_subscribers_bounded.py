"""``BroadcastHandle.subscribers()`` reads a bounded page of the call's subscribers and
says how many it left out (``more``, and a WARNING line "and N more"), where it read
the whole index of the queue; ``join()`` says when the app's registry of lanes holds
more than it reads, where it read the first 1,000 silently (issue 29, low findings)."""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, Tuple

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask import broadcast as broadcast_module
from minitask.broker.keys import AppKeys, QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "fanned"


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _plant(admin: "redis.Redis[bytes]", k: QueueKeys, count: int) -> None:
    """``count`` subscribers sub0.. at cursor 0, indexed as minitask indexes them."""
    now = int(time.time() * 1000)
    names = [f"sub{i:04d}" for i in range(count)]
    pipe = admin.pipeline(transaction=False)
    pipe.hset(k.broadcast("cursors"), mapping={name: 0 for name in names})
    pipe.hset(k.broadcast("seen"), mapping={name: now for name in names})
    pipe.hset(k.broadcast("state"), "indexed", 1)
    pipe.zadd(k.broadcast("places"), {name: 0 for name in names})
    pipe.zadd(k.broadcast("since"), {name: 0 for name in names})
    pipe.zadd(k.broadcast("alive"), {name: now for name in names})
    pipe.execute()


def _commands(admin: "redis.Redis[bytes]") -> Dict[str, int]:
    return {name.split("|")[0].replace("cmdstat_", ""): int(stats["calls"])
            for name, stats in admin.info("commandstats").items()}


def test_subscribers_reads_a_page_and_says_how_many_more(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    app, tick = _app(redis_server, "paged")
    try:
        _plant(admin, QueueKeys("paged", QUEUE), 300)
        handle = tick.delay(1)
        admin.config_resetstat()
        with caplog.at_level(logging.WARNING):
            page = handle.subscribers(most=100)
        assert page == [f"sub{i:04d}" for i in range(100)] and page.more == 200
        # read a page: never the whole index (a ZRANGE 0 -1 of 300), nor every cursor
        counted = _commands(admin)
        assert not {"hgetall", "hscan", "hkeys"} & set(counted), counted
        assert sum(counted.values()) < 20, counted
        said = [r for r in caplog.records if "and 200 more" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING, caplog.text
        assert handle.id in said[0].getMessage()
        whole = handle.subscribers(most=1000)  # all of them: nothing said
        assert len(whole) == 300 and whole.more == 0
        monkeypatch.setattr(broadcast_module, "SUBSCRIBERS_MOST", 50)
        assert handle.subscribers().more == 250  # the default cap is a stated one
        with pytest.raises(ConfigurationError, match="most must be"):
            handle.subscribers(most=0)
    finally:
        app.close()


def test_join_says_when_the_lanes_read_are_not_all(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    app, tick = _app(redis_server, "laned")
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", int(time.time() * 1000))
        handle = tick.delay(3)
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        # the app's registry of lanes, filled past what a read takes
        admin.sadd(AppKeys("laned").lanes, *[f"{QUEUE}:other{i}" for i in range(30)])
        monkeypatch.setattr(broadcast_module, "LANES_READ", 10)
        with caplog.at_level(logging.WARNING):
            assert handle.join(timeout=10) == {"live": 3}
        said = [r for r in caplog.records if "lanes" in r.getMessage()
                and "more" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING, caplog.text
    finally:
        app.close()
