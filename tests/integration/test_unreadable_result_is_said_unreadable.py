"""A kept result no minitask wrote (a string, a hash, bytes that are no outcome) reads
``failed`` in ``handle.status()`` (SPEC.md names no other status), but no surface lets
that pass for a failure minitask recorded (probe 29h, L4): ``get()`` raises a
DecodeError saying why, ``minitask inspect`` says ``failed (unreadable: ...)`` and
``"unreadable": true`` in ``--json``, the dashboard's task page says it beside the
status. A dead letter, a failure minitask recorded, is ``failed`` alone (a real
redis-server)."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Callable, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import inspect as inspect_command
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from minitask.errors import DecodeError
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message

from tests.support.cli import operate_with
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app("unread", on="server")]

SAID = "failed (unreadable: no outcome minitask wrote can be read, see note)"

PLANTS = {
    "string": lambda client, key: client.set(key, "x"),
    "hash": lambda client, key: client.hset(key, "a", "b"),
    "junk": lambda client, key: client.rpush(key, b"\xff\xfe\x00junk"),
}


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    app.task(name="t.add")(lambda x, y: x + y)
    app.broker.queues.register_queues(["default"])
    return operate_with(app, monkeypatch, inspect_command)


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_result_no_minitask_wrote_is_said_unreadable_everywhere(
        operated: Minitask, admin: "redis.Redis[bytes]", kind: str) -> None:
    plant: Callable[..., object] = PLANTS[kind]
    plant(admin, queue_keys(operated.name, "default").result("r1"))
    handle = operated.handle("r1")
    assert handle.status() == "failed"  # SPEC.md's names: kept
    with pytest.raises(DecodeError):
        handle.get(timeout=1)
    code, said = cli("inspect", "-A", "x", "r1")
    assert code == 0, said
    assert f"status       {SAID}" in said.splitlines(), said
    assert "note         " in said, said
    code, said = cli("inspect", "-A", "x", "--json", "r1")
    report = json.loads(said)
    assert report["status"] == "failed" and report["unreadable"] is True, report
    status, page = get(Dashboard(operated), "/task/r1")
    assert status.startswith("200") and 'id="unreadable"' in page, page


def test_a_dead_letter_is_failed_alone(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    keys = queue_keys(operated.name, "default")
    admin.sadd(AppKeys(operated.name).queues, b"default")
    admin.zadd(keys.dead, {"d1": 1_700_000_000_000})
    admin.hset(keys.messages, "d1", encode_message(
        Message("d1", "t.add", [1, 2], {}, "default", 5, 1_700_000_000_000)))
    code, said = cli("inspect", "-A", "x", "d1")
    assert code == 0 and "status       failed" in said.splitlines(), said
    assert "unreadable" not in said, said
    code, said = cli("inspect", "-A", "x", "--json", "d1")
    assert json.loads(said)["unreadable"] is False
    status, page = get(Dashboard(operated), "/task/d1")
    assert status.startswith("200") and 'id="unreadable"' not in page
