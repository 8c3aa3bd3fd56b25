"""What a person reads of records minitask did not write is true and can be acted on:
an escaped id that ``dead list`` shows is typed back to ``dead show``, ``requeue`` and
``purge``; a dead letter with no readable record says "unknown", not an empty line;
a heartbeat in the future is no negative age; a schedule is listed under the field it
is stored and fired under, whatever its record calls itself."""
from __future__ import annotations

import json
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import dead as dead_command, status as status_command
from minitask.admin.activity import recent
from minitask.dashboard.views import dead as dead_view, workers as workers_view
from minitask.dashboard.web import Dashboard
from minitask.stores.recent import pack_entry
from minitask.stores.registry import TRUSTED_AHEAD_MS
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message
from minitask import printable as printing
from minitask.printable import printable

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call

#: Ids no minitask writes: not UTF-8, an escape character, a C1 control, a bidi control.
PLANTED = [b"\xff\xfe-id", b"ok\x1b[31m-id", "c1\u0085-id".encode(), "rtl\u202e-id".encode(),
           b"\x85-raw"]


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    """``app`` as the CLI's commands load it; they close it as they end: reopened."""
    return operate_with(app, monkeypatch, dead_command, status_command)


def plant_dead(client: "redis.Redis[bytes]", app: Minitask, task_id: bytes) -> None:
    """A dead letter of queue ``default`` with neither message nor reason."""
    client.sadd(AppKeys(app.name).queues, b"default")
    client.zadd(queue_keys(app.name, "default").dead, {task_id: 1_700_000_000_000})


@pytest.mark.parametrize("raw", PLANTED)
def test_an_escaped_id_from_dead_list_is_typed_back(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", raw: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    plant_dead(fake_redis, operated, raw)
    plant_dead(fake_redis, operated, b"bystander")
    code, listed = run(capsys, "dead", "-A", "x", "list")
    shown = printable(raw)
    assert code == 0 and shown in listed and "\x1b" not in listed
    assert raw in printing.typed_back(shown)
    code, text = run(capsys, "dead", "-A", "x", "show", shown)
    assert code == 0 and f"task id   {shown}\n" in text, text
    code, text = run(capsys, "dead", "-A", "x", "show", "--json", shown)
    assert code == 0 and json.loads(text)["task_id"] == raw.decode("utf-8", "backslashreplace")
    code, text = run(capsys, "dead", "-A", "x", "purge", shown)
    assert (code, text) == (0, "purged 1 dead letter(s)\n")
    assert fake_redis.zrange(queue_keys(operated.name, "default").dead, 0, -1) == [b"bystander"]


def test_an_escaped_utf8_id_is_requeued_and_one_not_utf8_is_refused_by_name(
        operated: Minitask, fake_redis: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant_dead(fake_redis, operated, b"ok\x1b-id")
    # a letter with no message, or one that cannot be decoded, is not requeued
    # (test_dead_requeue_says_what_it_did.py, test_dead_foreign_records.py)
    fake_redis.hset(queue_keys(operated.name, "default").messages, b"ok\x1b-id",
                    encode_message(Message("plain-id", "t", [], {}, "default", 5, 1)))
    plant_dead(fake_redis, operated, b"\xff-id")
    code, text = run(capsys, "dead", "-A", "x", "requeue", "ok\\x1b-id", "\\xff-id")
    assert code == 1
    # found by its escaped id; its message names another id (an id holding a control
    # character is no message's), so it stays (probe 18), as one not UTF-8 does
    assert "requeued 0 dead letter(s)" in text
    assert "'ok\\x1b-id' is not requeued: its message names another task id (plain-id)" \
        in text
    assert "'\\xff-id' is not requeued: its id is not UTF-8" in text
    assert sorted(fake_redis.zrange(queue_keys(operated.name, "default").dead, 0, -1)) == [
        b"ok\x1b-id", b"\xff-id"]


def test_purge_all_takes_ids_that_are_not_utf8_too(
        operated: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    for index in range(3):
        plant_dead(fake_redis, operated, b"\xff%d" % index)
    plant_dead(fake_redis, operated, b"plain")
    assert operated.purge_dead() == 4
    assert fake_redis.zcard(queue_keys(operated.name, "default").dead) == 0


def test_a_dead_letter_with_no_readable_record_says_unknown_not_nothing(
        operated: Minitask, fake_redis: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant_dead(fake_redis, operated, b"bare")
    fake_redis.hset(queue_keys(operated.name, "default").dead_info, b"bare", b"\xc1garbage")
    code, text = run(capsys, "dead", "-A", "x", "show", "bare")
    assert code == 0
    lines: List[str] = text.splitlines()
    assert all(line.split(maxsplit=1)[1:] for line in lines), text  # no label without a value
    assert "task      unknown (its message is missing or cannot be decoded)" in lines
    assert "attempts  unknown" in lines and "error     none recorded" in lines
    assert ("reason    unreadable dead-letter record: cannot decode outcome: FormatError "
            "(8 bytes)") in lines


@pytest.mark.parametrize("ahead_ms", [5_000, 3_600_000])
def test_a_heartbeat_in_the_future_is_no_negative_age(
        operated: Minitask, clock: Any, ahead_ms: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    beat = clock.now_ms() + ahead_ms
    operated.broker.registry.heartbeat("ahead", {"pid": 1, "beat_ms": beat}, beat,
                                       ttl_ms=60_000)
    view = workers_view(operated)
    code, text = run(capsys, "status", "-A", "x", "--json")
    assert code == 0
    report = json.loads(text)
    if ahead_ms <= TRUSTED_AHEAD_MS:  # a clock a little ahead: live, beating "just now"
        assert [worker["heartbeat_age_s"] for worker in view["workers"]] == [0.0]
        assert [worker["heartbeat_age_s"] for worker in report["workers"]] == [0.0]
    else:  # further ahead than a live worker's can be: listed apart, with how far
        assert view["workers"] == report["workers"] == []
        assert [worker["ahead_s"] for worker in view["ahead"]] == [3600.0]
        assert [worker["ahead_s"] for worker in report["workers_ahead"]] == [3600.0]


def test_a_schedule_is_listed_under_the_field_it_is_stored_under(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    @app.periodic(every=60.0, name="nightly")
    def nightly() -> None:
        """A schedule whose record is copied under another field."""

    worker = app.worker(burst=True)
    worker.starting()
    schedules = queue_keys(app.name, "default").schedules
    fake_redis.hset(schedules, b"copied", fake_redis.hget(schedules, b"nightly") or b"")
    assert sorted(schedule.name for schedule in app.schedules()) == ["copied", "nightly"]


@pytest.mark.parametrize("score", [float("inf"), float("-inf"), 1.5, -1e20, 1e300, 0.0, 1.0])
def test_a_time_of_death_that_is_no_time_is_unreadable_naming_its_key_never_a_date(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", score: float,
        capsys: pytest.CaptureFixture[str]) -> None:
    """inf was listed as dying on 9999-12-31, 1.5 and -1e20 on 1970-01-01."""
    dead = queue_keys(operated.name, "default").dead
    plant_dead(fake_redis, operated, b"odd")
    fake_redis.zadd(dead, {b"odd": score})
    code, text = run(capsys, "dead", "-A", "x", "list")
    assert code == 0 and "9999-" not in text and "1970-" not in text, text
    assert f"dead letter odd: its time of death in key {dead} is no time" in text
    code, text = run(capsys, "dead", "-A", "x", "show", "odd")
    assert code == 0 and f"dead at   its time of death in key {dead}" in text
    code, text = run(capsys, "dead", "-A", "x", "show", "--json", "odd")
    shown = json.loads(text)
    assert shown["dead_at"] is None and dead in shown["unreadable"]
    (row,) = dead_view(operated)["dead"]
    assert row["dead_at"] is None and dead in row["unreadable"]


@pytest.mark.parametrize("field, value", [("beat_ms", "1e400"), ("beat_ms", "nan"),
                                          ("processed", "inf"), ("failed", "-1"),
                                          ("running", "1.5"), ("pid", "9" * 30)])
def test_a_worker_count_that_is_no_number_is_shown_as_unknown_never_as_0(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any, field: str,
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A beat_ms of 1e400 said "heartbeat 0.0 s ago", a processed of inf "processed 0"."""
    beat = clock.now_ms() - 7_000
    info = {"pid": 1, "beat_ms": beat, "processed": 4, "failed": 2, "running": 1,
            "recycled": 0, "pool": "process", "queues": "default"}
    operated.broker.registry.heartbeat("w", {**info, field: value}, beat, ttl_ms=60_000)
    code, text = run(capsys, "status", "-A", "x", "--json")
    [worker] = json.loads(text)["workers"]
    key = "heartbeat_age_s" if field == "beat_ms" else field
    assert code == 0 and worker[key] is None, worker
    code, text = run(capsys, "status", "-A", "x")
    line = next(line for line in text.splitlines() if line.startswith("  w  "))
    assert ("heartbeat unreadable" if field == "beat_ms" else f"{field} ?") in line or (
        field == "pid"), line
    assert "heartbeat 0.0 s ago" not in line
    [listed] = workers_view(operated)["workers"]
    assert listed[key] is None
    page = call(Dashboard(operated), "/workers")[2]
    assert "None" not in page and "?" in page


@pytest.mark.parametrize("skew", ["9" * 30, "-" + "9" * 30, "1e400"])
def test_a_clock_skew_no_clock_can_have_is_no_warning(
        operated: Minitask, clock: Any, skew: str, capsys: pytest.CaptureFixture[str]) -> None:
    beat = clock.now_ms()
    operated.broker.registry.heartbeat("w", {"pid": 1, "beat_ms": beat, "clock_skew_ms": skew},
                                       beat, ttl_ms=60_000)
    code, text = run(capsys, "status", "-A", "x", "--json")
    report = json.loads(text)
    assert code == 0 and report["workers"][0]["clock_skew_ms"] is None
    assert not [warning for warning in report["warnings"] if "worker w's" in warning]


@pytest.mark.parametrize("attempt", [-5, 2 ** 63, 10 ** 6])
def test_a_recent_outcome_with_an_attempt_no_task_makes_is_left_out(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any, attempt: int) -> None:
    plant_dead(fake_redis, operated, b"x")  # registers the queue
    recent_key = queue_keys(operated.name, "default").recent
    for task_id, tried in (("good", 2), ("odd", attempt)):
        fake_redis.xadd(recent_key, {"e": pack_entry(task_id, "n", "succeeded", clock.now_ms(),
                                                     tried, 0.5, "w")})
    assert [entry.task_id for entry in recent(operated).tasks] == ["good"]
