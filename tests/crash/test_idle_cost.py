"""Idle cost: an idle worker blocks on Redis instead of polling it, and wakes for work."""
from __future__ import annotations

import time
from typing import Dict

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: The measurement window, and the most calls per second an idle worker may make.
WINDOW = 3.0
MAX_CALLS_PER_SECOND = 5.0
#: Commands only this test sends while it measures.
OURS = ("info",)


def command_calls(kit: Kit) -> Dict[str, int]:
    stats = kit.client.info("commandstats")
    return {name[len("cmdstat_"):]: int(value["calls"]) for name, value in stats.items()}


# waiters: every fetching thread's BLPOP, plus each process's XREAD on the cancel streams
@pytest.mark.parametrize("pool,concurrency,waiters", [("process", 2, 4), ("thread", 4, 2),
                                                      ("asyncio", 100, 2)])
def test_idle_worker_makes_few_redis_calls_and_wakes_for_a_new_task(
        kit: Kit, pool: str, concurrency: int, waiters: int) -> None:
    # the app's default visibility timeout: what a user runs (the worker's lease
    # renewal and heartbeat period follow it, at a third of it)
    worker = kit.worker("--pool", pool, "-c", str(concurrency), visibility=None)
    # idle: every fetching thread (one per child; the dispatcher of a thread pool)
    # is blocked in its wait on Redis, and the worker's listener for orders in its own
    wait_until(lambda: kit.blocked_clients() >= waiters + 1,
               timeout=DEADLINE, message=f"{waiters} blocked client(s)")

    before = command_calls(kit)
    started = time.monotonic()
    time.sleep(WINDOW)  # the measurement window, not a synchronisation
    after = command_calls(kit)
    elapsed = time.monotonic() - started

    delta = {name: after[name] - before.get(name, 0) for name in after
             if name not in OURS and after[name] != before.get(name, 0)}
    rate = sum(delta.values()) / elapsed
    print(f"\nidle {pool} pool x{concurrency}: {rate:.2f} Redis calls/s {delta}")
    assert rate <= MAX_CALLS_PER_SECOND, (
        f"an idle worker made {rate:.1f} Redis calls/s over {elapsed:.1f} s: {delta}")

    handle = kit.tasks.record.delay("wake")
    assert handle.get(timeout=DEADLINE) == "wake"
    assert worker.poll() is None
