"""A counter in the app's metrics (or a queue's throughput) that minitask did not
write, a value Redis cannot add to, never makes a worker count its other counters
again and again (issue 29, section 1), planted before the worker starts.

Before, the heartbeat's one pipeline of HINCRBYs added every good count, then
raised on the one Redis refused ("hash value is not an integer", "would
overflow"): the worker kept the whole delta for its next heartbeat and added it
again, at every heartbeat, for as long as the planted value stayed; and it said so
only once. Now the refused field is left as it is, said once, and the others are
added once.
"""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Set

import pytest
import redis

from minitask import Minitask
from tests.apps.foreign import build
from tests.integration.test_foreign_data_keeps_workers_running import (
    APP, REGISTRY, SUBSCRIBER, ran, this_minute)
from tests.support.processes import exit_code
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Planted: (counter, value); a counter of the metrics hash the worker adds to as its
#: mark tasks end, or "throughput" for queue other's field of this minute's series.
PLANTED = [
    ("tasks\x1fother\x1fmark\x1fsucceeded", b"abc"),
    ("tasks\x1fother\x1fmark\x1fsucceeded", b"9223372036854775807"),  # +1 overflows
    ("tasks\x1fother\x1fmark\x1fsucceeded", b"1.5"),
    ("duration_sum\x1fmark", b"nan"),
    ("throughput", b"\xff\xfe"),
]
#: The worker's visibility timeout (s): it beats every second.
VISIBILITY = "3"
#: Tasks run after the start (each adds 1 to one duration bucket of mark).
TASKS = 3


def durations(admin: "redis.Redis[bytes]") -> int:
    """How many runs of mark the duration histogram of the metrics counts."""
    return sum(int(value) for field, value in admin.hgetall(REGISTRY.metrics).items()
               if field.startswith(b"duration\x1fmark\x1f"))


def beats(admin: "redis.Redis[bytes]") -> Set[bytes]:
    """Each live worker record's last heartbeat."""
    return {admin.hget(REGISTRY.worker(member.decode()), "beat_ms") or b""
            for member in admin.zrange(REGISTRY.workers, 0, -1)}


@pytest.fixture
def producer(redis_server: Any, admin: "redis.Redis[bytes]",
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = build(redis_server.url)
    try:
        yield app
    finally:
        app.close()


@pytest.mark.parametrize("counter, value", PLANTED)
def test_a_counter_redis_cannot_add_to_never_makes_a_worker_count_the_others_again(
        counter: str, value: bytes, producer: Minitask, admin: "redis.Redis[bytes]",
        redis_server: Any, processes: Any, tmp_path: Path) -> None:
    # the series of this minute and the next: the tasks may end in either
    keys = ([this_minute(), next_minute()] if counter == "throughput" else [REGISTRY.metrics])
    field = b"other" if counter == "throughput" else counter.encode()
    for key in keys:
        admin.hset(key, field, value)
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "-Q", "other,timed,news", "--pool", "thread", "--name",
                              SUBSCRIBER, env={"MINITASK_BROKER_URL": redis_server.url,
                                               "TEST_VISIBILITY": VISIBILITY}, log=log)
    tokens = [uuid.uuid4().hex for _ in range(TASKS)]
    for token in tokens:
        producer.tasks["mark"].delay(token)
    for token in tokens:
        assert ran(admin, token, time.monotonic() + 60), log.read_text()[-3000:]
    wait_until(lambda: durations(admin) >= TASKS, timeout=60, message="the counts added")
    # three heartbeats more: before, each added the same counts again
    seen = beats(admin)
    wanted = len(seen) + 3

    def beaten() -> bool:
        seen.update(beats(admin))
        return len(seen) >= wanted

    wait_until(beaten, timeout=60, message="three heartbeats more")
    worker.send_signal(signal.SIGTERM)
    assert exit_code(worker) == 0, log.read_text()[-3000:]
    assert durations(admin) == TASKS, log.read_text()[-3000:]
    text = log.read_text()
    for key in keys:
        assert admin.hget(key, field) == value  # left as it was
        assert text.count(f"key {key}") <= 1, text[-3000:]  # said once
    assert "could not add this worker's metrics" not in text, text[-3000:]


def next_minute() -> str:
    return REGISTRY.throughput(int(time.time() * 1000) // 60_000 + 1)
