"""Fixtures of the crash tests: a fresh redis-server per test, a kit around it, and the
asyncio app's ``nap`` task on the test's side."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Tuple

import pytest
import redis

from minitask import Minitask

from tests.support.crash_kit import Kit
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer


@pytest.fixture
def make_kit(processes: Processes, tmp_path: Path,
             request: pytest.FixtureRequest) -> Iterator[Callable[[RedisServer], Kit]]:
    """Kits on servers the test chose (e.g. one with persistence)."""
    kits = []

    def make(server: RedisServer) -> Kit:
        kit = Kit(server, processes, tmp_path)
        kits.append(kit)
        return kit

    try:
        yield make
    finally:
        failed = did_fail(request)
        for kit in kits:
            if failed:
                try:
                    print(f"queue state at the end: {kit.queue_state()}")
                except redis.RedisError as exc:
                    print(f"queue state unknown: {exc}")
                kit.print_logs()
            kit.close()


@pytest.fixture
def kit(start_redis: Callable[..., RedisServer], make_kit: Callable[[RedisServer], Kit]) -> Kit:
    """A kit on a fresh redis-server of this test only: no state leaks between tests."""
    return make_kit(start_redis())


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    """A fresh redis-server of this test only."""
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Tuple[Minitask, Any]]:
    """The app of tests.apps.aio on the test's side, and its ``nap`` task."""
    import tests.apps.aio as aio
    app = Minitask("aio", broker=server.client())
    yield app, app.task(name=aio.nap.name)(aio.nap.func)
    app.close()


@pytest.fixture
def nap(producer: Tuple[Minitask, Any]) -> Any:
    """``nap(key, seconds)`` of tests.apps.aio, sent from the test's side."""
    return producer[1]
