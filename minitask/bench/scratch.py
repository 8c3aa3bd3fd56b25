"""The bench's own keys, and the clean-up of every key a bench leaves.

The bare redis-py baselines need a few keys that are not minitask's: they are
all named here, under ``minitask-bench:`` (no app's hash tag, so no app's key
can be one of them). A bench's apps' keys are minitask's own, named by
``broker/keys.py``; ``purge`` deletes them by its patterns.
"""
from __future__ import annotations

import redis

from ..broker.keys import PREFIX, app_patterns

#: The start of every key of the baselines, and of every throwaway app name.
BENCH = f"{PREFIX}-bench"


def bench_key(*parts: str) -> str:
    """A key of the bench's own, never one of an app's: ``minitask-bench:<parts>``."""
    return ":".join((BENCH, *parts))


#: The SET loops' key.
BASELINE = bench_key("baseline")
#: The two-round-trip loop's lists: LMOVE from the first to the second, then LREM.
SOURCE = bench_key("src")
WORK = bench_key("work")
#: The bare wake-up baseline's lists: tokens sent, and the latencies echoed back.
WAKE = bench_key("wake")
WAKE_REPLY = bench_key("wake", "reply")
#: The bare LPUSH the producer rows compare delay() with.
LPUSH = bench_key("lpush")


def late_key(app_name: str) -> str:
    """The list the periodic bench's tick runs append "<task id> <lateness ms>" to."""
    return bench_key("periodic", "late", app_name)


def purge(client: "redis.Redis", app_name: str, *keys: str) -> None:
    """Delete every key of the app ``app_name`` (found with SCAN, unlinked 1,000 at a
    time), then ``keys``."""
    for pattern in app_patterns(app_name):
        batch = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.unlink(*batch)
                batch = []
        if batch:
            client.unlink(*batch)
    if keys:
        client.unlink(*keys)
