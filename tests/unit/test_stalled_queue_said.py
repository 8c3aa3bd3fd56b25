"""A queue whose every fetch Redis refuses (a key of it a fetch cannot recover from)
is said stalled, and why, by ``minitask status`` and the dashboard's queues page, not
only once in the worker's log (issue 29: before, both showed the queue with ready
tasks and a live worker, running 0, and nothing said it was stalled). The worker
says so in its record at each heartbeat, and no more once the queue is served again;
a record's field that is no worker's says nothing."""
from __future__ import annotations

import json
from typing import Any

import pytest

from minitask import Minitask
from minitask.admin import stalled_queues
from minitask.cli import status as status_command
from minitask.dashboard.views import queues as queues_view
from minitask.errors import BrokerError
from minitask.worker.outages import STALLED_REASON_MOST, QueueRefusals
from minitask.dashboard.web import Dashboard
from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call

REFUSAL = ("WRONGTYPE minitask key minitask:{test:default}:messages holds another type "
           "than the hash minitask keeps there; nothing was changed")


def refused(reason: str = REFUSAL) -> BrokerError:
    return BrokerError(reason, reason="wrong type")


def test_the_refusals_say_which_queues_are_stalled_and_why() -> None:
    refusals = QueueRefusals()
    assert refusals.stalled() == "{}"
    refusals.refused("default", refused())
    refusals.refused("other", refused("x\x1b[2J" * 1000))
    said = json.loads(refusals.stalled())
    assert said["default"] == REFUSAL
    assert len(said["other"]) <= STALLED_REASON_MOST + 40 and "\x1b" not in said["other"]
    refusals.served("default", sent=float("inf"))
    assert list(json.loads(refusals.stalled())) == ["other"]


@pytest.mark.parametrize("planted", ["nan", "[1, 2]", '{"q": 5}', "\xff", "{" * 5000])
def test_a_stalled_field_no_worker_wrote_says_nothing(planted: str) -> None:
    assert stalled_queues([{"name": "w", "stalled": planted}]) == {}


def test_status_and_the_queues_page_say_the_queue_is_stalled(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    operate_with(app, monkeypatch, status_command)

    @app.task()
    def job() -> None:
        pass

    job.delay()
    worker = app.worker(["default"], name="w1")
    worker._queues.refusals.refused("default", refused())  # as a refused fetch does
    worker.beat()
    code, text = run(capsys, "status", "-A", "x")
    assert code == 0
    (line,) = [line for line in text.splitlines() if "STALLED" in line]
    assert "minitask:{test:default}:messages" in line and "w1" in line
    code, text = run(capsys, "status", "-A", "x", "--json")
    assert "minitask:{test:default}:messages" in json.loads(text)["stalled"]["default"]
    (row,) = [q for q in queues_view(app)["queues"] if q["queue"] == "default"]
    assert "minitask:{test:default}:messages" in row["stalled"]
    page = call(Dashboard(app), "/")
    assert page[0] == "200 OK" and "STALLED: Redis refuses every fetch of it" in page[2]
    worker._queues.refusals.served("default", sent=float("inf"))  # its keys fixed
    worker.beat()
    code, text = run(capsys, "status", "-A", "x")
    assert "STALLED" not in text
    (row,) = [q for q in queues_view(app)["queues"] if q["queue"] == "default"]
    assert row["stalled"] == ""
