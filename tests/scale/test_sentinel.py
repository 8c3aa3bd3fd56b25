"""A Sentinel failover under a running worker and a connected producer.

A primary, one replica and three sentinels (quorum 2, down after 1 s). The
primary is SIGKILLed while tasks are queued and running; the replica is
promoted; the worker and the producer must find it through the sentinels and
go on. Before the kill the test waits until the replica has every write the
primary acknowledged to the producer, so that nothing acknowledged may be
lost: what Redis's asynchronous replication can lose is exactly the writes
acknowledged after the replica's last applied offset (see docs/guide/scaling.rst).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import TOPOLOGY_DEADLINE, SentinelGroup
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    group = SentinelGroup(tmp_path / "sentinel")
    group.directory.mkdir()
    try:
        group.start()
        yield group
    finally:
        group.stop()


def test_worker_and_producer_survive_a_failover_and_lose_no_acknowledged_task(
        sentinels: SentinelGroup, make_kit: Callable[..., ScaleKit]) -> None:
    primary, replica = sentinels.primary, sentinels.replica
    assert primary is not None and replica is not None
    kit = make_kit(sentinels.url, sentinels.url)
    queue = kit.app.default_queue
    # the producer's fast path must reach the primary the sentinels name, nothing else
    parked = kit.task("record").apply_async((kit.key("parked"),), queue=queue, delay=3600)
    with primary.client() as client:
        assert client.zscore(kit.app.broker.queues.keys(queue).delayed, parked.id) is not None
    kit.worker("--pool", "thread", "-c", "2")
    before = [f"a{i}" for i in range(60)]
    for name in before:
        kit.enqueue("slow", name, 0.05, queue=queue)
    wait_until(lambda: kit.done_count(before) >= 5, timeout=DEADLINE,
               message="the worker to get going")

    # Every enqueue above was acknowledged; make sure the replica has them all.
    wait_until(lambda: SentinelGroup.replica_in_sync(primary, replica),
               timeout=DEADLINE, interval=0.01, message="the replica to catch up")
    done_at_kill = kit.done_count(before)
    primary.stop()  # SIGKILL: no chance to hand anything over
    killed_at = time.monotonic()

    # The producer goes on at once: each enqueue is retried until a primary takes it.
    after = [f"b{i}" for i in range(20)]
    for name in after:
        kit.enqueue("slow", name, 0.01, queue=queue)
    first_enqueue_after = time.monotonic() - killed_at
    kit.wait_all_done(before + after, timeout=DEADLINE)
    recovered = time.monotonic() - killed_at

    assert sentinels.primary_port() == replica.port, "the replica was promoted"
    done = kit.marks_of("done", before + after)
    duplicates = {name: marks for name, marks in done.items() if len(marks) > 1}
    crossed = len(before) - done_at_kill
    print(f"sentinel failover: {crossed} task(s) queued or running crossed it; "
          f"first enqueue acknowledged {first_enqueue_after:.2f} s after the kill, all "
          f"{len(before) + len(after)} done {recovered:.2f} s after it; lost: 0; "
          f"run twice: {len(duplicates)} {sorted(duplicates)}")
    assert crossed > 0, "the failover was meant to happen with tasks in flight"
    assert all(done[name] for name in before + after)
    assert parked.cancel() is True, "the delayed task crossed the failover too"
    kit.wait_drained([queue], timeout=TOPOLOGY_DEADLINE)
