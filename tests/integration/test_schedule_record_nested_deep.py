"""A schedule record whose JSON head is nested past the parser's depth (probe 17 H1):
``json.loads`` raised RecursionError, which no reader caught, so every worker of the
schedule's queue stopped serving (its heartbeat gone, then exiting after its grace,
and crashing again as it started), and ``minitask schedules``, ``app.schedules()``
and the dashboard's schedules page failed. The record is now unreadable, as any
damaged one: listed as such, never fired, and the queue keeps flowing."""
from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest
import redis

from minitask import Minitask
from minitask.dashboard.web import Dashboard
from minitask.errors import DecodeError
from minitask.periodic import from_record
from tests.integration.test_foreign_data_keeps_workers_running import (  # noqa: F401
    TIMED, answers, ran, serve)

pytestmark = pytest.mark.integration

DEEP = [b"[" * 100_000 + b"\nx", b'{"v":1,"x":' + b"[" * 100_000 + b"\nx",
        b"{" * 5000 + b"\nx"]


@pytest.mark.parametrize("record", DEEP, ids=["list", "in a field", "objects"])
def test_a_record_nested_too_deep_is_a_decode_error(record: bytes) -> None:
    with pytest.raises(DecodeError, match="cannot decode a schedule record"):
        from_record(record)


@pytest.mark.timeout(120)
def test_a_record_nested_too_deep_never_stops_a_worker_of_its_queue(
        serve: Callable[[str], Minitask],  # noqa: F811
        admin: "redis.Redis[bytes]") -> None:
    producer = serve("thread")
    for number, record in enumerate(DEEP):
        admin.hset(TIMED.schedules, f"deep{number}", record)
        admin.zadd(TIMED.ticks, {f"deep{number}": 1000})  # due: a worker would fire it
    answers("schedule record", producer, admin, Dashboard(producer))
    listed = {schedule.name for schedule in producer.schedules()}
    assert "hourly" in listed
    token = uuid.uuid4().hex  # the worker still serves, a while after it read them
    time.sleep(1.0)
    producer.tasks["mark"].delay(token)
    assert ran(admin, token, time.monotonic() + 10.0)
