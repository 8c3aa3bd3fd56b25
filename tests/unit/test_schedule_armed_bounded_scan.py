"""A worker's read of its queues' schedules costs a bounded batch whatever the queue
holds (probe 21a, issue 29 H1): the earliest ticks, a scan on from the last read (a
schedule behind thousands of earlier planted ticks is found within a few reads, then
read by name), and no record longer than any minitask writes is fetched."""
from __future__ import annotations

from typing import Callable

import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.unit.test_periodic_worker import START, make_periodic, started

#: schedules_armed.lua's batch (stores/schedules.py ARMED_BATCH)
ARMED_BATCH = 1000
JUNK = 2 * ARMED_BATCH + 500


def test_a_read_takes_a_batch_scans_on_and_never_fetches_a_huge_record(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    started(make_periodic(make_app, [], every=10.0))  # writes every10, armed at START + 10 s
    keys = queue_keys("p", "default")
    redis_client.hset(keys.schedules, mapping={f"junk{i:05d}": b"\xc1junk" for i in range(JUNK)})
    redis_client.zadd(keys.ticks, {f"junk{i:05d}": START for i in range(JUNK)})
    redis_client.hset(keys.schedules, "huge", b"x" * 2_000_000)
    redis_client.zadd(keys.ticks, {"huge": START - 1})
    store = make_periodic(make_app, [], every=10.0).broker.schedules  # knows nothing yet
    reads = []
    for _ in range(4):
        entries = store.armed(["default"])["default"]
        reads.append(entries)
        # the earliest batch, a batch of the scan, and what it knows: never all of it
        assert len(entries) <= 2 * ARMED_BATCH + 1
        (huge,) = [entry for entry in entries if entry.name == "huge"]
        assert huge.schedule is None and huge.record == b"" and "2,000,000 bytes" in huge.problem
    found = [any(entry.name == "every10" for entry in entries) for entries in reads]
    # behind 2,501 earlier ticks: found by the scan's second read, then kept by name
    assert found.index(True) <= 2 and all(found[found.index(True):]), found
    (entry,) = [entry for entry in reads[-1] if entry.name == "every10"]
    assert entry.schedule is not None and entry.tick_ms == START + 10_000
