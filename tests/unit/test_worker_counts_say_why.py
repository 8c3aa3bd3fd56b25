"""What ``minitask status`` and ``minitask shutdown --all`` say of the worker registry
is true (probe 9): a record whose heartbeat lies ahead of this machine's clock is
counted apart from the live workers in the shutdown question, as status lists it
(L3), and a member left out of the listing is said to be left out for its true
reason, an expired record or the cap (L4)."""
from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.admin import workers as admin_workers
from minitask.broker.keys import AppKeys
from minitask.cli import shutdown as shutdown_command, status as status_command

from tests.support.cli import operate_with, run


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    """``app`` as the commands load it (they close it as they end: kept open)."""
    return operate_with(app, monkeypatch, shutdown_command, status_command)


def beat(app: Minitask, worker: str, at_ms: int) -> None:
    app.broker.registry.heartbeat(worker, {"pid": 1, "beat_ms": at_ms}, at_ms, ttl_ms=60_000)


def test_the_shutdown_question_counts_a_clock_ahead_record_apart_and_still_asks_it(
        operated: Minitask, clock: Any, capsys: pytest.CaptureFixture[str]) -> None:
    beat(operated, "here", clock.now_ms())
    beat(operated, "ahead", clock.now_ms() + 3_600_000)
    code, text = run(capsys, "status", "-A", "x")
    assert code == 0 and "1 live worker(s)" in text and "1 worker record(s) with a " \
        "heartbeat more than 15 s ahead" in text
    code, text = run(capsys, "shutdown", "-A", "x", "--all")
    assert code == 2
    assert ("this stops all 1 live worker(s) and 1 whose clock runs ahead (status lists it "
            "apart, not live) of app 'test': add --yes to do it") in text, text
    code, text = run(capsys, "shutdown", "-A", "x", "--all", "--yes")
    assert code == 0
    assert sorted(text.splitlines()) == ["asked worker ahead to stop", "asked worker here to stop"]


def test_the_shutdown_question_of_live_workers_only_says_only_them(
        operated: Minitask, clock: Any, capsys: pytest.CaptureFixture[str]) -> None:
    beat(operated, "here", clock.now_ms())
    code, text = run(capsys, "shutdown", "-A", "x", "--all")
    assert code == 2 and "this stops all 1 live worker(s) of app 'test': add --yes" in text


def test_a_member_whose_record_expired_is_not_blamed_on_the_cap(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    beat(operated, "here", clock.now_ms())
    # a worker killed with SIGKILL: its record expired, its member is still recent
    fake_redis.zadd(AppKeys(operated.name).workers, {b"killed": clock.now_ms() - 10_000})
    code, text = run(capsys, "status", "-A", "x")
    assert code == 0
    (line,) = [line for line in text.splitlines() if "more in the worker registry" in line]
    assert line == ("  ... and 1 more in the worker registry, not shown: 1 whose record has "
                    "expired (its worker stopped without leaving the registry: killed, or "
                    "cut off from Redis; it leaves 60 s after its last heartbeat)")
    code, text = run(capsys, "status", "-A", "x", "--json")
    report = json.loads(text)
    assert report["workers_left_out"] == 1
    assert report["workers_left_out_why"] == {"past_limit": 0, "record_gone": 1,
                                              "not_minitask": 0}


def test_each_reason_a_member_is_left_out_is_counted_apart(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(admin_workers, "SHOWN_WORKERS", 2)
    monkeypatch.setattr(status_command, "SHOWN_WORKERS", 2)
    now = clock.now_ms()
    for index in range(3):
        beat(operated, f"w{index}", now - index)  # w2 beat last but one: past the cap
    workers = AppKeys(operated.name).workers
    fake_redis.zadd(workers, {b"killed": now - 10, b"\xff-planted": now - 20})
    code, text = run(capsys, "status", "-A", "x", "--json")
    assert json.loads(text)["workers_left_out_why"] == {"past_limit": 3, "record_gone": 0,
                                                        "not_minitask": 0}
    monkeypatch.setattr(admin_workers, "SHOWN_WORKERS", 10)
    monkeypatch.setattr(status_command, "SHOWN_WORKERS", 10)
    code, text = run(capsys, "status", "-A", "x")
    (line,) = [line for line in text.splitlines() if "more in the worker registry" in line]
    assert line.startswith("  ... and 2 more in the worker registry, not shown: 1 whose "
                           "record has expired (")
    assert line.endswith("; 1 that no worker wrote (no worker name, or a record minitask "
                         "does not write: said in the log)")
    assert "beat last" not in line
