"""``minitask inspect recent`` says how many entries of the record it left out as
unreadable: with every entry left out it said "no recent outcomes", as if none had
ended, though the record held some (issue 29, a low finding of the last probe)."""
from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.admin.activity import recent
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import inspect as inspect_command
from minitask.stores.recent import pack_entry

from tests.support.cli import operate_with, run


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    return operate_with(app, monkeypatch, inspect_command)


def _plant(client: "redis.Redis[bytes]", app: Minitask, clock: Any, good: int) -> None:
    """Two entries no minitask wrote (an attempt out of range, no msgpack) and ``good``
    entries that are minitask's, in queue ``default``'s record."""
    client.sadd(AppKeys(app.name).queues, b"default")
    key = queue_keys(app.name, "default").recent
    client.xadd(key, {"e": pack_entry("odd", "n", "succeeded", clock.now_ms(), -5, 0.5, "w")})
    client.xadd(key, {"e": b"\xc1 not msgpack"})
    for index in range(good):
        client.xadd(key, {"e": pack_entry(f"good{index}", "n", "succeeded", clock.now_ms(), 1,
                                          0.5, "w")})


def test_all_left_out_is_said_with_how_many(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    _plant(fake_redis, operated, clock, good=0)
    listing = recent(operated)
    assert listing.tasks == [] and listing.left_out == 2
    code, text = run(capsys, "inspect", "-A", "x", "recent")
    assert code == 0, text
    assert "no recent outcomes" not in text.splitlines(), text
    assert "2 entries of the record left out as unreadable" in text, text
    code, text = run(capsys, "inspect", "-A", "x", "recent", "--json")
    assert code == 0 and json.loads(text)["left_out"] == 2, text


def test_some_left_out_is_said_beside_those_shown(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    _plant(fake_redis, operated, clock, good=3)
    code, text = run(capsys, "inspect", "-A", "x", "recent")
    assert code == 0 and "good2" in text, text
    assert "3 shown of the last 3 outcome(s) read" in text, text
    assert "2 entries of the record left out as unreadable" in text, text


def test_nothing_left_out_says_nothing_of_it(
        operated: Minitask, fake_redis: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    fake_redis.sadd(AppKeys(operated.name).queues, b"default")
    code, text = run(capsys, "inspect", "-A", "x", "recent")
    assert code == 0 and "no recent outcomes" in text.splitlines() and "left out" not in text
    assert recent(operated).left_out == 0
