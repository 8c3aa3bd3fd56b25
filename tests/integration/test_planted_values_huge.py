"""Values longer than minitask writes (planted: a message over max_message_bytes, a
result or a dead-letter record over any outcome) are measured and never read: 20
planted messages of 10 MB made each listing of scheduled or running tasks read
200 MB and block Redis for 1.5 s, a planted 20 MB result was read twice by every
``status()``, and a dead-letter listing read each planted value whole inside Redis
to cut it. Each is shown "too large (N bytes, not read)", with the good entries
beside it, and left where it is.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.errors import DecodeError
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
PLANTED = 5
#: Longer than any message (1 MiB and room) or outcome minitask writes by default.
BIG = 3_000_000
#: What the reads of one test may make Redis send, in all (each planted value once
#: would be 15 MB).
MOST_SENT = 1_000_000
K = queue_keys("foreign", "other")


def sent_and_hgets(admin: "redis.Redis[bytes]") -> Tuple[int, int]:
    """Bytes Redis has sent, and HGETs it has run (scripts' included), so far."""
    stats = admin.info("commandstats").get("cmdstat_hget", {})
    return int(admin.info("stats")["total_net_output_bytes"]), int(stats.get("calls", 0))


def test_listings_of_scheduled_and_running_tasks_never_read_a_planted_message(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    good = app.tasks["mark"].apply_async(("good-one",), delay=3600)
    planted = [app.tasks["mark"].apply_async((f"t{i}",), delay=3600) for i in range(PLANTED)]
    for handle in planted:
        admin.hset(K.messages, handle.id, b"\x1b" * BIG)
    before, _ = sent_and_hgets(admin)
    code, scheduled = cli("inspect", "-A", APP, "scheduled")
    assert code == 0, scheduled
    assert good.id in scheduled and "too large (3,000,000 bytes, not read)" in scheduled
    dashboard = Dashboard(app)
    for path in ("/scheduled", "/api/scheduled"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
        assert good.id in body
    # the same tasks leased: the running listing reads them alike
    deadline_score = (int(time.time() * 1000) + 600_000) * 10 + 4
    for handle in [good, *planted]:
        admin.zrem(K.delayed, handle.id)
        admin.zadd(K.leases, {handle.id: deadline_score})
    code, running = cli("inspect", "-A", APP, "running")
    assert code == 0, running
    assert good.id in running and "too large" in running
    status, body = get(dashboard, "/running")
    assert status.startswith("200") and good.id in body
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    assert all(admin.hstrlen(K.messages, handle.id) == BIG for handle in planted)


def test_a_dead_letter_listing_measures_planted_values_and_reads_none(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    now_ms = int(time.time() * 1000)
    for index in range(PLANTED):
        task_id = f"planted-{index}"
        admin.zadd(K.dead, {task_id: now_ms})
        admin.hset(K.messages, task_id, b"\x92" * BIG)
        admin.hset(K.dead_info, task_id, b"\x93" * BIG)
    before, hgets = sent_and_hgets(admin)
    code, listed = cli("dead", "list", "-A", APP)
    assert code == 0, listed
    assert "planted-0" in listed
    status, body = get(Dashboard(app), "/dead")
    assert status.startswith("200") and "planted-0" in body
    code, shown = cli("dead", "show", "-A", APP, "planted-1")
    assert "too large (3,000,000 bytes, not read)" in shown, shown
    sent, hgets_after = sent_and_hgets(admin)
    assert sent - before < MOST_SENT, f"Redis sent {sent - before:,} bytes"
    # each planted value was measured (HSTRLEN), none read whole to be cut
    assert hgets_after == hgets, f"{hgets_after - hgets} planted values read"


def test_a_planted_result_message_or_note_is_never_read_by_a_task_s_readers(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    finished = app.tasks["mark"].apply_async(("done",))
    admin.delete(K.messages)
    admin.delete(*K.ready)
    admin.rpush(K.result(finished.id), b"\x92" + b"x" * BIG)
    scheduled = app.tasks["mark"].apply_async(("later",), delay=3600)
    admin.hset(K.messages, scheduled.id, b"\x1b" * BIG)
    before = sent_and_hgets(admin)[0]
    assert finished.status() == "failed"  # as an unreadable result reads
    with pytest.raises(DecodeError, match="too large"):
        finished.get(timeout=1)
    code, said = cli("inspect", "-A", APP, finished.id)
    assert "too large" in said, said
    code, said = cli("inspect", "-A", APP, scheduled.id)
    assert code == 0 and "too large (3,000,000 bytes, not read)" in said, said
    dashboard = Dashboard(app)
    for task_id in (finished.id, scheduled.id):
        for path in (f"/task/{task_id}", f"/api/task/{task_id}"):
            status, _ = get(dashboard, path)
            assert status.startswith("200"), (path, status)
    assert scheduled.cancel()  # withdrawn, its message never read
    assert scheduled.status() == "cancelled"
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    assert admin.llen(K.result(finished.id)) == 1  # left where it is


def test_a_retry_note_longer_than_any_outcome_is_not_read(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    waiting = app.tasks["mark"].apply_async(("again",), delay=3600)
    admin.hset(K.retrying, waiting.id, b"\x93" * BIG)
    before = sent_and_hgets(admin)[0]
    assert waiting.status() == "retrying"  # as it is: only its note is not read
    code, said = cli("inspect", "-A", APP, waiting.id)
    assert "too large" in said, said
    assert sent_and_hgets(admin)[0] - before < MOST_SENT


def test_a_planted_flow_spec_or_workflow_id_is_not_read_by_a_task_s_page(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    queued = app.tasks["mark"].apply_async(("queued",))
    admin.hset(K.flow, queued.id, b"\n" * 9 + b"g" * BIG)  # a group's spec, its last line
    admin.hset(K.once(queued.id), "w", b"w" * BIG)  # a workflow step's marker
    before = sent_and_hgets(admin)[0]
    code, said = cli("inspect", "-A", APP, queued.id)
    assert code == 0 and "queued" in said, said
    for path in (f"/task/{queued.id}", f"/api/task/{queued.id}"):
        status, _ = get(Dashboard(app), path)
        assert status.startswith("200"), (path, status)
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"


def test_a_schedule_listing_sends_no_planted_record(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    app.add_schedule("good-schedule", "mark", every=3600.0, args=("s",))
    timed = queue_keys("foreign", "other")
    tick = int(time.time() * 1000) + 3_600_000
    for index in range(PLANTED):  # armed (a tick) and unarmed, each over any record
        admin.hset(timed.schedules, f"planted-{index}", b"\x81" * BIG)
        if index % 2:
            admin.zadd(timed.ticks, {f"planted-{index}": tick})
        admin.hset(timed.fired, f"at:planted-{index}", b"9" * BIG)
    admin.hset(timed.fired, "at:good-schedule", b"9" * BIG)
    before = sent_and_hgets(admin)[0]
    code, said = cli("schedules", "-A", APP)
    assert "good-schedule" in said, said
    assert "too large (3,000,000 bytes, not read)" in said, said
    status, body = get(Dashboard(app), "/schedules")
    assert status.startswith("200") and "good-schedule" in body
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"


def test_a_group_s_planted_values_are_measured_and_the_group_called_corrupt(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    workflows = app.broker.workflows
    join = {"q": "other", "id": "g-next", "i": 0, "ttl": 60_000}
    admin.hset(K.group("g-next"), mapping={"size": 2, "next": b"\x81" * BIG})
    admin.hset(K.group("g-results"), mapping={"size": 2, "next": b"\xc0"})
    admin.hset(K.group_results("g-results"), "1", b"\x92" * BIG)
    before = sent_and_hgets(admin)[0]
    reply = workflows._join(join, "ok", b"\x01")
    assert reply[0] == b"corrupt" and b"what follows it is 3000000 bytes" in reply[1], reply[:2]
    reply = workflows._join({**join, "id": "g-results"}, "ok", b"\x01")
    assert reply[0] == b"corrupt" and b"member 1" in reply[1], reply[:2]
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"


def test_the_async_twins_measure_as_the_blocking_ones(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    finished = app.tasks["mark"].apply_async(("done",))
    admin.delete(K.messages, *K.ready)
    admin.rpush(K.result(finished.id), b"\x92" + b"x" * BIG)
    scheduled = app.tasks["mark"].apply_async(("later",), delay=3600)
    admin.hset(K.messages, scheduled.id, b"\x1b" * BIG)
    before = sent_and_hgets(admin)[0]

    async def look() -> Tuple[str, bool, str]:
        try:
            return (await finished.astatus(), await scheduled.acancel(),
                    await scheduled.astatus())
        finally:
            await app.aclose()

    assert asyncio.run(look()) == ("failed", True, "cancelled")
    sent = sent_and_hgets(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"


def test_a_measured_read_refused_by_an_acl_is_a_broker_error_naming_it(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: Any) -> None:
    admin.acl_setuser("nohstrlen", enabled=True, passwords=["+pw"], keys=["*"],
                      commands=["+@all", "-hstrlen"])
    try:
        url = redis_server.url.replace("redis://", "redis://nohstrlen:pw@", 1)
        denied = build(url)
        try:
            with pytest.raises(BrokerError) as caught:
                denied.broker.workflows.workflow_of("other", "x")
            assert "hstrlen" in str(caught.value).lower(), caught.value
            with pytest.raises(BrokerError):
                denied.broker.admin.record("other", "x")
        finally:
            denied.close()
    finally:
        admin.acl_deluser("nohstrlen")
