"""A ``durability_timeout`` the socket timeout would cut short is refused whatever
sets the durability (the app or one call), before anything is written; and a WAIT
that a socket timeout ends all the same (a client whose timeout could not be read)
says what happened, the same way sync and async: written, not confirmed.

Real redis-server with no replica: WAIT 1 waits its whole timeout there.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Tuple

import pytest
import redis

from minitask import ConfigurationError, DurabilityError, Minitask
from minitask.broker import durability
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Generous on a loaded machine; the socket timeouts here are at most 15 s.
NO_HANG = 10.0


def _app(url: str, **options: Any) -> Tuple[Minitask, Any]:
    app = Minitask("fits", broker=url, **options)

    @app.task(name="fits.add")
    def add(x: int, y: int) -> int:
        return x + y

    return app, add


def _both(app: Minitask, add: Any) -> Tuple[Callable[[], Any], Callable[[], Any]]:
    def sync() -> Any:
        return add.apply_async([1, 2], durability="replicated")

    async def send() -> Any:
        try:
            return await add.aapply_async([1, 2], durability="replicated")
        finally:
            await app.aclose()

    def async_() -> Any:
        return asyncio.run(send())

    return sync, async_


def _queued(admin: "redis.Redis[bytes]") -> int:
    return sum(1 for _ in admin.scan_iter(match=b"*:messages")
               if admin.hlen(_) > 0)


@pytest.mark.parametrize("twin", [0, 1], ids=["sync", "async"])
def test_a_chosen_timeout_over_the_socket_timeout_is_refused_for_a_per_call_durability(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", twin: int) -> None:
    app, add = _app(redis_server.url, durability_timeout=120)  # no app-wide durability
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        _both(app, add)[twin]()
    assert time.monotonic() - started < NO_HANG
    assert "durability_timeout of 120 s" in str(caught.value)
    assert "socket timeout of 15 s" in str(caught.value)
    assert _queued(admin) == 0  # refused before anything was written
    app.close()


@pytest.mark.parametrize("twin", [0, 1], ids=["sync", "async"])
def test_the_default_timeout_over_a_short_socket_timeout_is_refused_per_call(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", twin: int) -> None:
    app, add = _app(redis_server.url + "?socket_timeout=0.5")  # default durability_timeout 1 s
    with pytest.raises(ConfigurationError) as caught:
        _both(app, add)[twin]()
    assert "not shorter than the Redis socket timeout of 0.5 s" in str(caught.value)
    assert _queued(admin) == 0
    add.delay(1, 2)  # without durability the short socket timeout is fine
    app.close()


def test_a_wait_the_socket_timeout_cuts_short_says_written_not_confirmed_sync_and_async(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a client whose socket timeout cannot be read (raising=False: main has no such function)
    monkeypatch.setattr(durability, "socket_limit", lambda client: None, raising=False)
    app, add = _app(redis_server.url + "?socket_timeout=0.5", durability_timeout=3)
    said = []
    for twin in _both(app, add):
        started = time.monotonic()
        with pytest.raises(DurabilityError) as caught:
            twin()
        assert time.monotonic() - started < NO_HANG
        error = caught.value
        assert error.task_id is not None
        assert app.handle(error.task_id).status() == "queued"  # written all the same
        text = str(error)
        assert "is Redis running" not in text and "server is running" not in text
        assert "made the write" in text and "not confirmed" in text
        said.append(text.replace(error.task_id, "ID"))
    assert said[0] == said[1]
    app.close()
