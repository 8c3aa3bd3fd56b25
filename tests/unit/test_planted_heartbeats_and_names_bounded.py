"""Records anyone with Redis access can plant cost a bounded read and never a 500:
a worker's running_ids nested too deep for the parser or longer than a worker
writes is shown as unreadable (the long one named in a log line); a queue name
longer than any minitask accepts is left out of every listing, naming the registry
key; a dashboard action whose task_id holds an escape character is a 400; a queue's
record of recent outcomes no outcome can be added to is said where it is read."""
from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.admin import shown_queues
from minitask.admin.activity import recent
from minitask.broker.keys import MAX_NAME, AppKeys, queue_keys
from minitask.cli import status as status_command
from minitask.cli.main import main
from minitask.dashboard.views import SHOWN_RUNNING
from minitask.dashboard.web import Dashboard
from minitask.errors import ConfigurationError
from minitask.sending import check_queue_name
from tests.unit.test_dashboard import call


def plant_worker(app: Minitask, client: "redis.Redis[bytes]", clock: Any,
                 running_ids: str) -> None:
    now = clock.now_ms()
    client.hset(AppKeys(app.name).worker("ghost"),
                mapping={"beat_ms": now, "queues": "default", "running_ids": running_ids})
    client.zadd(AppKeys(app.name).workers, {"ghost": now})


@pytest.mark.parametrize("running_ids", ["[" * 100_000, "[" * 60_000])
def test_running_ids_nested_too_deep_are_unreadable_never_a_500(
        app: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any, running_ids: str) -> None:
    plant_worker(app, fake_redis, clock, running_ids)
    dashboard = Dashboard(app)
    for path in ("/workers", "/api/workers", "/worker/ghost"):
        assert call(dashboard, path)[0] == "200 OK", path
    assert json.loads(call(dashboard, "/api/workers")[2])["workers"][0]["running_ids"] is None
    assert "unreadable" in call(dashboard, "/worker/ghost")[2]


def test_running_ids_longer_than_a_worker_writes_are_left_out_naming_the_key(
        app: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    plant_worker(app, fake_redis, clock, json.dumps([f"id-{i:08d}" for i in range(100_000)]))
    dashboard = Dashboard(app)
    status, _, body = call(dashboard, "/api/workers")
    assert status == "200 OK" and len(body) < 10_000
    assert json.loads(body)["workers"][0]["running_ids"] is None
    assert AppKeys(app.name).worker("ghost") in caplog.text and "bytes long" in caplog.text
    plant_worker(app, fake_redis, clock, json.dumps([str(i) for i in range(5000)]))
    ids = json.loads(call(dashboard, "/api/workers")[2])["workers"][0]["running_ids"]
    assert len(ids) == SHOWN_RUNNING


def test_a_queue_name_longer_than_any_minitask_accepts_is_refused_and_left_out(
        app: Minitask, fake_redis: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    check_queue_name("q" * MAX_NAME)
    too_long = f"{MAX_NAME + 1} characters long; names are at most {MAX_NAME}"
    with pytest.raises(ConfigurationError, match=too_long):
        check_queue_name("q" * (MAX_NAME + 1))
    fake_redis.sadd(AppKeys(app.name).queues, "c" * 1_000_000, "fine")
    assert "fine" in shown_queues(app)[0]
    assert all(len(name) <= MAX_NAME for name in shown_queues(app)[0])
    assert AppKeys(app.name).queues in caplog.text and len(caplog.text) < 10_000
    monkeypatch.setattr(status_command, "load", lambda _: app)
    monkeypatch.setattr(app, "close", lambda: None)
    assert main(["status", "-A", "x"]) == 0
    out, err = capsys.readouterr()
    assert "fine" in out and len(out + err) < 10_000
    status, _, page = call(Dashboard(app), "/")
    assert status == "200 OK" and "c" * 1000 not in page


@pytest.mark.parametrize("task_id", ["%1B[31m", "%E2%80%AE"])  # ESC, U+202E
def test_an_action_on_a_task_id_no_task_can_have_is_a_400(app: Minitask, task_id: str
                                                          ) -> None:
    dashboard = Dashboard(app)
    for form in (f"task_id={task_id}", f"task_id={task_id}&confirm=yes"):
        status, _, body = call(dashboard, "/actions/cancel", "POST",
                               f"{form}&csrf={dashboard.csrf_token}")
        assert status == "400 Bad Request" and "\x1b" not in body and "task_id" in body, body


@pytest.mark.parametrize("kind", ["last-id", "string"])
def test_a_record_of_recent_outcomes_no_outcome_can_be_added_to_is_said(
        app: Minitask, fake_redis: "redis.Redis[bytes]", kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Outcomes went unrecorded, silently: the readers said nothing."""
    key = queue_keys(app.name, "default").recent
    if kind == "string":
        fake_redis.set(key, "x")
    else:
        fake_redis.xadd(key, {"e": "x"}, id=f"{2 ** 64 - 1}-{2 ** 64 - 1}")
    recent(app, ["default"])
    assert key in caplog.text and "recent outcomes cannot be written" in caplog.text
