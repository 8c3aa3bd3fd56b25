"""A SIGTERM sent the moment a worker is listed as live is a graceful stop (exit 0,
nothing left listed), on every pool: its handlers are in place before it is listed.
They were installed after, and a stop sent as soon as the registry showed the worker
(as a deploy script or an orchestrator might) killed it outright, -15, six times in
eight."""
from __future__ import annotations

import signal
import time

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send

pytestmark = pytest.mark.crash

ROUNDS = 3


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_sigterm_as_soon_as_the_worker_is_listed_stops_it_gracefully(
        kit: Kit, pool: str) -> None:
    for _ in range(ROUNDS):
        worker = kit.worker("--pool", pool, "-c", "1")
        deadline = time.monotonic() + DEADLINE
        while kit.live_workers() == 0:  # as tight as a watcher can be
            assert worker.poll() is None, "the worker ended before it was listed"
            assert time.monotonic() < deadline, "the worker was never listed"
        send(worker, signal.SIGTERM)
        assert exit_code(worker) == 0
        assert kit.live_workers() == 0  # it took itself off the list
