"""``minitask inspect workflow ID`` (and ``inspect ID``) of a workflow whose plan
record minitask did not write says so once: its error, naming the key (issue 29, probe
29f's L2), on the suite's redis-server. Before, the same problem came twice: as the
error and as a warning of the foreign-data log. The dashboard's page, which shows it
in the page, still says it once in the log.
"""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask, chain
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.foreign_said import said_afresh
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What this process said before (another test's plant) is not remembered here."""
    said_afresh(monkeypatch)


def test_an_unreadable_plan_is_said_once_by_the_cli(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    mark = app.tasks["mark"]
    handle = chain(mark.s("a"), mark.si("b")).delay()
    key = queue_keys("foreign", "other").workflow(handle.id)
    assert admin.exists(key)
    admin.set(key, b"\xff\x00\x01" * 100)
    code, out = cli("inspect", "workflow", handle.id, "-A", APP)
    assert code == 1 and key in out, out
    everything = out + caplog.text
    assert everything.count(key) == 1, everything
    caplog.clear()
    status, body = get(Dashboard(app), f"/workflow/{handle.id}")
    assert status == "200 OK" and "Traceback" not in body
    assert caplog.text.count(key) == 1, caplog.text
