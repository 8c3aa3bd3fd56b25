"""``cancel(running=...)`` takes a bool: "yes", None or 1 is refused before anything is
done, by every handle and its async twin (a broadcast's too, which withdraws nothing)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from minitask import ConfigurationError, Minitask


@pytest.mark.parametrize("running", ["yes", "no", None, 1, 0])
def test_a_running_that_is_not_a_bool_is_refused_and_nothing_is_cancelled(
        fake_redis: "redis.Redis[bytes]", running: Any) -> None:
    app = Minitask("bools", broker=fake_redis)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(broadcast=True, queue="fan")
    def note() -> None:
        return None

    handle = add.apply_async([1, 2], delay=600)
    for call in (lambda: handle.cancel(running=running),
                 lambda: asyncio.run(handle.acancel(running=running)),
                 lambda: note.delay().cancel(running=running),
                 lambda: asyncio.run(note.delay().acancel(running=running))):
        with pytest.raises(ConfigurationError, match="running must be True or False"):
            call()
    assert handle.status() == "scheduled"
    assert handle.cancel(running=False) is True  # a bool still works
