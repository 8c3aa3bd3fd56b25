"""Every reader of dead letters reads a record minitask did not write tolerantly (probe
10, M2): a dead letter whose record is not msgpack, of the wrong shape, huge, not UTF-8
or of wrong types inside, or whose queue's dead_info key is of another Redis type, is
listed and shown as "unreadable dead-letter record: <why> (<its length> bytes)", beside
the good letters, by ``dead list``, ``dead list --json``, ``dead show``, the dashboard's
dead page and /api/dead, ``app.dead_letters()`` and ``minitask inspect``: exit 0,
never an internal error (a real redis-server)."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import msgpack
import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import dead as dead_command, inspect as inspect_command
from minitask.dashboard.web import Dashboard
from minitask.wire.message import Message, Outcome
from minitask.wire.serializer import encode_message, encode_outcome

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call

pytestmark = [pytest.mark.integration, pytest.mark.app("deadrd", on="server")]

DIED_MS = 1_700_000_000_000
PREFIX = "unreadable dead-letter record: "

#: Records no minitask writes, by the id of the dead letter that holds each.
FOREIGN: Dict[str, bytes] = {
    "not-msgpack": b"\xc1\xc1 not msgpack",
    "a-list": msgpack.packb([1, 2, 3]),
    "huge": b"\xc1" + b"x" * 3_000_000,  # beyond what a listing reads of a letter
    # a map of this version whose status is a str that is not UTF-8
    "not-utf8": b"\x82\xa1v\x01\xa6status\xa2\xff\xfe",
    "wrong-types": msgpack.packb({"v": 1, "status": "dead", "finished_at_ms": "soon",
                                  "attempt": [1], "reason": 7}),
    "deep": b"\x91" * 100_000 + b"\xc0",
    "empty": b"",
}


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    """``app`` (on the suite's redis-server) as ``minitask dead`` and ``inspect`` load it."""
    app.task(name="t.add")(lambda x, y: x + y)
    return operate_with(app, monkeypatch, dead_command, inspect_command)


@pytest.fixture
def client(admin: "redis.Redis[bytes]") -> "redis.Redis[bytes]":
    return admin


def plant(client: "redis.Redis[bytes]", app: Minitask, task_id: str, n: int,
          info: Optional[bytes]) -> None:
    """A dead letter of queue ``default`` with a message minitask writes and ``info``
    as its record (None: none)."""
    keys = queue_keys(app.name, "default")
    client.sadd(AppKeys(app.name).queues, b"default")
    client.zadd(keys.dead, {task_id: DIED_MS + n})
    client.hset(keys.messages, task_id, encode_message(
        Message(task_id, "t.add", [1, n], {}, "default", 5, DIED_MS)))
    if info is not None:
        client.hset(keys.dead_info, task_id, info)


def good_record(finished_ms: int = DIED_MS) -> bytes:
    return encode_outcome(Outcome("dead", finished_ms, exc_type="ValueError",
                                  message="boom", reason="failed", attempt=1))


def readers(operated: Minitask, capsys: pytest.CaptureFixture[str]) -> Dict[str, Any]:
    """What each reader of dead letters says of them all, each exit code checked 0."""
    code, table = run(capsys, "dead", "-A", "x", "list")
    assert code == 0, table
    code, text = run(capsys, "dead", "-A", "x", "list", "--json")
    assert code == 0, text
    listed = {row["task_id"]: row for row in json.loads(text)}
    status, _, page = call(Dashboard(operated), "/dead")
    assert status == "200 OK", page
    status, _, api = call(Dashboard(operated), "/api/dead")
    assert status == "200 OK", api
    return {"table": table, "json": listed, "page": page,
            "api": {row["task_id"]: row for row in json.loads(api)["dead"]},
            "app": {letter.task_id: letter for letter in operated.dead_letters()}}


def shown(operated: Minitask, capsys: pytest.CaptureFixture[str], task_id: str) -> List[str]:
    """``dead show`` and ``dead show --json`` of one letter: its reason line, then the
    reason the JSON gives, each exit code checked 0."""
    code, text = run(capsys, "dead", "-A", "x", "show", task_id)
    assert code == 0, text
    (line,) = [line for line in text.splitlines() if line.startswith("reason    ")]
    code, text = run(capsys, "dead", "-A", "x", "show", "--json", task_id)
    assert code == 0, text
    return [line[len("reason    "):], json.loads(text)["reason"]]


def test_each_foreign_record_is_shown_unreadable_with_why_and_length_beside_good_ones(
        operated: Minitask, client: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    for n, (task_id, info) in enumerate(FOREIGN.items()):
        plant(client, operated, task_id, n, info)
    plant(client, operated, "good", len(FOREIGN), good_record())
    seen = readers(operated, capsys)
    assert set(seen["json"]) == set(seen["api"]) == set(seen["app"]) == {*FOREIGN, "good"}
    for task_id, info in FOREIGN.items():
        length = f"({len(info):,} bytes)"
        reasons = [seen["json"][task_id]["reason"], seen["api"][task_id]["reason"],
                   seen["app"][task_id].reason, *shown(operated, capsys, task_id)]
        for reason in reasons:  # why, then the length: never the empty reason of old
            assert reason.startswith(PREFIX) and reason.endswith(length), (task_id, reason)
            assert len(reason) > len(PREFIX + length) + 1, (task_id, reason)
        # the message beside it is read all the same
        assert seen["json"][task_id]["name"] == seen["app"][task_id].name == "t.add"
        (row,) = [line for line in seen["table"].splitlines() if f" {task_id} " in line]
        assert PREFIX in row and length in row, row
    assert seen["page"].count(PREFIX.rstrip()) >= len(FOREIGN)
    for good in (seen["json"]["good"], seen["api"]["good"]):
        assert (good["reason"], good["exc_type"], good["message"]) == (
            "failed", "ValueError", "boom")
    assert shown(operated, capsys, "good") == ["failed", "failed"]


@pytest.mark.parametrize("kind", ["string", "list", "set", "zset", "stream"])
def test_a_dead_info_key_of_another_type_hides_no_letter_and_says_so(
        operated: Minitask, client: "redis.Redis[bytes]", kind: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    ids = ["first", "second", "third"]
    for n, task_id in enumerate(ids):
        plant(client, operated, task_id, n, None)
    dead_info = queue_keys(operated.name, "default").dead_info
    {"string": lambda: client.set(dead_info, b"x"),
     "list": lambda: client.rpush(dead_info, b"x"),
     "set": lambda: client.sadd(dead_info, b"x"),
     "zset": lambda: client.zadd(dead_info, {b"x": 1}),
     "stream": lambda: client.xadd(dead_info, {b"x": b"y"})}[kind]()
    why = f"{PREFIX}key {dead_info} holds another type than a hash (no minitask wrote it)"
    seen = readers(operated, capsys)
    assert list(seen["json"]) == list(seen["api"]) == list(seen["app"]) == ids
    for task_id in ids:
        assert seen["json"][task_id]["reason"] == seen["api"][task_id]["reason"] == why
        assert seen["app"][task_id].reason == why
        assert seen["json"][task_id]["name"] == seen["api"][task_id]["task"] == "t.add"
        assert shown(operated, capsys, task_id) == [why, why]
        code, text = run(capsys, "inspect", "-A", "x", task_id)
        assert code == 0 and "status       failed" in text, text
    assert why in seen["table"] and seen["page"].count(PREFIX.rstrip()) >= len(ids)
    assert client.type(dead_info).decode() == kind  # left as it was: not minitask's


def test_a_record_whose_time_is_no_time_is_inspected_with_a_note(
        operated: Minitask, client: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    """A record that decodes, with a finished_at_ms beyond any datetime (2**63): ``dead
    show`` and ``inspect`` say what they can, and that the time is none."""
    plant(client, operated, "far", 0, good_record(2 ** 63))
    assert shown(operated, capsys, "far") == ["failed", "failed"]
    code, text = run(capsys, "inspect", "-A", "x", "far")
    assert code == 0, text
    assert "finished_at_ms 9223372036854775808) is no time minitask writes" in text
    code, text = run(capsys, "inspect", "-A", "x", "--json", "far")
    assert code == 0, text
    report = json.loads(text)
    assert report["finished_at"] is None and report["reason"] == "failed"
