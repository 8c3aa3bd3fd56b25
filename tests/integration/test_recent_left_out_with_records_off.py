"""``minitask inspect recent`` of an app that keeps no record (``recent_outcomes=0``)
said "keeps no record of them" though the records held entries it left out as
unreadable (written by another program, or before the setting changed): it now says
how many were left out, as with the record on (issue 29, a low finding of probe 29e).
On the suite's redis-server."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import inspect as inspect_command
from tests.support.cli import operate_with, run

pytestmark = [pytest.mark.integration,
              pytest.mark.app("off", on="server", recent_outcomes=0)]


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    return operate_with(app, monkeypatch, inspect_command)


def test_left_out_entries_are_said_with_the_record_off(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    client: "redis.Redis[bytes]" = operated.broker.client
    client.sadd(AppKeys(operated.name).queues, b"default")
    key = queue_keys(operated.name, "default").recent
    client.xadd(key, {"e": b"\xc1 not msgpack"})
    client.xadd(key, {"x": b"y"})
    code, text = run(capsys, "inspect", "-A", "x", "recent")
    assert code == 0, text
    assert "keeps no record" not in text, text
    assert "2 entries of the record left out as unreadable" in text, text


def test_nothing_left_out_still_says_the_record_is_off(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    operated.broker.client.sadd(AppKeys(operated.name).queues, b"default")
    code, text = run(capsys, "inspect", "-A", "x", "recent")
    assert code == 0 and "keeps no record of them (recent_outcomes=0)" in text, text
