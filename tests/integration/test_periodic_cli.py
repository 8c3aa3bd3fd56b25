"""``minitask schedules``: lists what is in Redis, in a table or as JSON."""
from __future__ import annotations

import json

import pytest

from minitask import Minitask
from minitask.cli import main
from tests.apps.periodic import beat
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app("periodic", on="server")]


@pytest.fixture(autouse=True)
def beat_for_the_cli(app: Minitask, redis_server: RedisServer,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI finds the test's app (``-A tests.apps.periodic``) on the suite's server,
    with the task its schedules name."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app.task(name="beat")(beat)


def test_schedules_lists_name_task_spec_tz_next_and_last_as_json(
        app: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    added = app.add_schedule("nightly", "beat", cron="0 3 * * *", tz="Europe/Paris")
    app.add_schedule("often", "beat", every=30.0, queue="maintenance")

    assert main(["schedules", "-A", "tests.apps.periodic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["app"] == "periodic"
    nightly, often = report["schedules"]
    assert added.next_at is not None
    assert nightly == {"name": "nightly", "task": "beat", "queue": "default",
                       "spec": "0 3 * * *", "tz": "Europe/Paris", "cron": "0 3 * * *",
                       "every": None, "catch_up": "latest", "overlap": True,
                       "next_at": added.next_at.isoformat().replace("+00:00", "Z"),
                       "last_at": None}
    assert (often["spec"], often["queue"]) == ("every 30s", "maintenance")


def test_schedules_prints_a_table(app: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedules", "-A", "tests.apps.periodic"]) == 0
    assert "no schedules" in capsys.readouterr().out
    app.add_schedule("nightly", "beat", cron="0 3 * * *", tz="Europe/Paris")
    assert main(["schedules", "-A", "tests.apps.periodic"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header.split()[:5] == ["name", "task", "queue", "spec", "tz"]
    assert row.split()[:4] == ["nightly", "beat", "default", "0"]
    assert "Europe/Paris" in row and row.rstrip().endswith("-")  # never ran yet
