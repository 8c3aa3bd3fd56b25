"""A schedule record held in another queue's ``schedules`` hash than its runs' queue, on
a real redis-server (issue 29, probe 17: L1); and the errors of an unreadable record
naming the hash field, not the name the record carries.

minitask keeps a schedule in its run's queue, where each fire looks for it. One
planted in another queue's hash was read as readable: a worker fired it against
its run's queue, found it "changed" at every fire and read the schedules again at
every wake (14 reads in 6 s instead of 1), and ``minitask schedules`` listed it
with a stale next time, saying nothing. It is now unreadable (listed as such,
naming both queues) and never fired.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.admin.scheduling import schedule_listing
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = QueueKeys("l1", "default")


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    # a clock that stands still: a worker reads the schedules again only when told to
    made = Minitask("l1", broker=redis_server.client(),
                    clock=ManualClock(int(time.time() * 1000)))

    @made.task(queue="default", name="beat")
    def beat() -> str:
        return "beat"

    try:
        yield made
    finally:
        made.close()


def _plant(app: Minitask, admin: "redis.Redis[bytes]") -> int:
    """Schedule 'tick' (every 2 s, in queue default), and 'moved': the same but for
    queue 'other', held in default's hash, with a tick a minute past; that tick."""
    schedule = app.add_schedule("tick", "beat", every=2.0)
    moved = dataclasses.replace(schedule, name="moved", queue="other")
    admin.hset(K.schedules, "moved", moved.record())
    past_ms = app.clock.now_ms() - 60_000
    admin.zadd(K.ticks, {"moved": past_ms})
    return past_ms


def _unreadable(app: Minitask) -> Dict[str, str]:
    listed, unreadable = schedule_listing(app)
    assert [schedule.name for schedule in listed] == ["tick"]
    return {entry["field"]: entry["problem"] for entry in unreadable}


def test_a_record_whose_runs_go_to_another_queue_is_unreadable_and_never_fired(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    past_ms = _plant(app, admin)
    problems = _unreadable(app)
    assert list(problems) == ["moved"]
    assert "'other'" in problems["moved"] and "'default'" in problems["moved"]
    [entry] = [armed for armed in app.broker.schedules.armed(["default"])["default"]
               if armed.name == "moved"]
    assert entry.schedule is None  # a worker never fires it
    assert app.broker.schedules.one("default", "moved") is None
    assert admin.zscore(K.ticks, "moved") == past_ms  # left as it was


def test_a_worker_says_so_once_and_reads_the_schedules_no_more_for_it(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    _plant(app, admin)
    store = app.broker.schedules
    read = store.armed
    reads: List[Any] = []

    def counted(queues: Any, *rest: Any) -> Any:
        reads.append(queues)
        return read(queues, *rest)

    store.armed = counted  # type: ignore[method-assign]
    worker = app.worker(queues=["default"], burst=True)
    worker.starting()
    with caplog.at_level(logging.WARNING, logger="minitask.worker.ticks"):
        for _ in range(5):
            drain(worker)
    assert len(reads) == 1, reads  # each fire found it 'changed' and read them again
    said = [record.getMessage() for record in caplog.records if "'moved'" in record.getMessage()]
    assert len(said) == 1 and "'other'" in said[0], said
    assert admin.llen(QueueKeys("l1", "other").ready[4]) == 0  # never fired


def test_a_record_s_error_names_its_field_not_the_name_it_carries(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    record = app.add_schedule("tick", "beat", every=2.0).record()
    head, _, body = record.partition(b"\n")
    timing = json.loads(head)
    planted: List[bytes] = [
        json.dumps({**timing, "name": "inner", "tz": "../../etc/passwd"}).encode(),
        json.dumps({**timing, "name": "inner", "every_ms": None}).encode(),
    ]
    for index, bad in enumerate(planted):
        admin.hset(K.schedules, f"field{index}", bad + b"\n" + body)
    problems = _unreadable(app)
    assert sorted(problems) == ["field0", "field1"]
    for problem in problems.values():
        assert "'field" in problem and "inner" not in problem, problem
