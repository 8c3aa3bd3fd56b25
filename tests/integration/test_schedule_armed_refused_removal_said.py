"""A worker's read of the armed schedules (schedule_armed.lua) removes ticks naming no
schedule record; where Redis refused that removal (an ACL without ZREM here), the ticks
were still counted as dangling and the log said they "were removed" while every one
stayed. Now the log says they could not be removed, and how many; a test-owned
redis-server."""
from __future__ import annotations

import logging
from typing import Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

TIMED = queue_keys("foreign", "timed")


@pytest.fixture
def real(redis_server: RedisServer, admin: "redis.Redis[bytes]",
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    """The foreign app with one real schedule, ``real``, in queue ``timed``."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = build(redis_server.url)
    app.add_schedule("real", "hourly", every=60.0, queue="timed")
    try:
        yield app
    finally:
        app.close()


def test_a_refused_removal_of_dangling_ticks_is_never_said_as_done(
        real: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer,
        caplog: pytest.LogCaptureFixture) -> None:
    admin.zadd(TIMED.ticks, {f"ghost{i}": 1_000 + i for i in range(5)})
    admin.acl_setuser("nozrem2", enabled=True, nopass=True, keys=["*"], channels=["*"],
                      commands=["+@all", "-zrem"])
    other = build(redis_server.url.replace("redis://", "redis://nozrem2:x@"))
    try:
        with caplog.at_level(logging.WARNING):
            found = other.broker.schedules.armed(["timed"], {"timed": ["real"]})
        assert [entry.name for entry in found["timed"]] == ["real"]
        assert admin.zcard(TIMED.ticks) == 6  # none removed
        assert "were removed" not in caplog.text, caplog.text
        assert "5 tick(s) naming no schedule record could not be removed" in caplog.text, \
            caplog.text
        caplog.clear()
        with caplog.at_level(logging.WARNING):  # where Redis takes it, removed and said so
            real.broker.schedules.armed(["timed"], {"timed": ["real"]})
        assert admin.zrange(TIMED.ticks, 0, -1) == [b"real"]
        assert "5 tick(s) naming no schedule record were removed" in caplog.text, caplog.text
    finally:
        other.close()
        admin.acl_deluser("nozrem2")
