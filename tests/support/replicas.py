"""What the durability tests share: a primary and one replica of it, both started by the
test, a replica frozen with SIGSTOP (so it acknowledges nothing until woken), and an app
whose writes wait for that replica.

A replica is frozen to hold its acknowledgements back: a write that WAITs for it cannot
return before it runs again, and one that does not wait returns at once. Every freeze
has a deadline and is ended in ``finally``.

A test module takes a ``pair`` fixture by importing one of the two below (both are
named ``pair``): ``from tests.support.replicas import pair_per_module  # noqa: F401``
(one pair for the module's tests) or ``pair_per_test`` (a fresh pair for each test)."""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest
import redis

from minitask import Minitask
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

#: Generous: the machine is slow and shared; only an upper bound is asserted.
NO_HANG = 20.0


def in_sync(primary: RedisServer, replica: RedisServer) -> bool:
    """Whether ``replica`` is linked to ``primary`` and has all it wrote."""
    try:
        with primary.client() as p, replica.client() as r:
            offset = int(p.info("replication")["master_repl_offset"])
            info = r.info("replication")
    except redis.RedisError:
        return False
    return info.get("master_link_status") == "up" and int(info["slave_repl_offset"]) >= offset


@contextmanager
def started_pair(directory: Path, binary: Optional[str] = None) -> Iterator[List[RedisServer]]:
    """A primary and one replica of it, in sync."""
    primary = RedisServer(0, directory / "primary", binary=binary)
    replica = RedisServer(0, directory / "replica", binary=binary)
    try:
        primary.start()
        replica.extra = ["--replicaof", "127.0.0.1", str(primary.port)]
        replica.start()
        wait_until(lambda: in_sync(primary, replica), timeout=60, message="the replica to sync")
        yield [primary, replica]
    finally:
        replica.stop()
        primary.stop()


@pytest.fixture(scope="module", name="pair")
def pair_per_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[List[RedisServer]]:
    """A primary and its replica, from the suite's redis-server, for the module's tests."""
    with started_pair(tmp_path_factory.mktemp("pair")) as servers:
        yield servers


@pytest.fixture(name="pair")
def pair_per_test(tmp_path: Path) -> Iterator[List[RedisServer]]:
    """A primary and its replica, from the suite's redis-server, of this test only."""
    with started_pair(tmp_path / "servers") as servers:
        yield servers


class Freeze:
    """When a frozen server was woken (``time.monotonic()``), None while it sleeps."""

    def __init__(self, process: Any) -> None:
        self.process = process
        self.woken_at: Any = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        with self._lock:
            if self.woken_at is None:
                self.process.send_signal(signal.SIGCONT)
                self.woken_at = time.monotonic()


@contextmanager
def frozen(server: RedisServer, seconds: float) -> Iterator[Freeze]:
    """``server`` stopped with SIGSTOP, and woken by a timer after ``seconds`` (and in
    any case when the block ends). A frozen replica acknowledges nothing, so a
    write that waits for it returns after ``woken_at``. (Reading from it while it
    sleeps would wait as well: tests read it afterwards.)"""
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    freeze = Freeze(server.process)
    timer = threading.Timer(seconds, freeze.wake)
    timer.start()
    try:
        yield freeze
    finally:
        timer.cancel()
        freeze.wake()


def returned_after_wake(freeze: Freeze, returned_at: float) -> bool:
    with freeze._lock:
        return freeze.woken_at is not None and returned_at >= freeze.woken_at


def durable_app(primary: RedisServer, name: str) -> Minitask:
    """An app on ``primary`` whose writes wait 0.2 s for its replica (``replicated``):
    ``add`` in queue ``one``, ``add2`` in queue ``two``, and ``lim`` in ``one``, limited
    (rate and running count: its sends are flow-controlled)."""
    app = Minitask(name, broker=primary.url, durability="replicated",
                   durability_timeout=0.2)

    @app.task(name="add", queue="one")
    def add(a: int, b: int = 0) -> int:
        return a + b

    @app.task(name="add2", queue="two")
    def add2(a: int, b: int = 0) -> int:
        return a + b

    @app.task(name="lim", queue="one", rate_limit="50/s", max_running=1)
    def lim(n: int) -> int:
        return n
    return app
