"""A lone surrogate (half of a UTF-16 pair) read from Redis, as a JSON ``\\udc80``
in a worker's heartbeat decodes to, never ends a page in a 500 nor a command or a
log line in a UnicodeEncodeError: the page shows it escaped, a link or a form field
carries its escape, JSON output its JSON escape (``encodable``)."""
from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.cli.logs import JsonFormatter
from minitask.cli.options import emit_json
from minitask.dashboard.web import Dashboard
from minitask.printable import encodable
from tests.unit.test_dashboard import call


def plant_worker(app: Minitask, client: "redis.Redis[bytes]", clock: Any, **fields: str) -> None:
    now = clock.now_ms()
    client.hset(AppKeys(app.name).worker("ghost"),
                mapping={"beat_ms": now, "queues": "default", **fields})
    client.zadd(AppKeys(app.name).workers, {"ghost": now})


def test_encodable_escapes_lone_surrogates_only() -> None:
    assert encodable("plain") == "plain"
    assert encodable("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"
    assert encodable("a\udc80b\ud800") == "a\\udc80b\\ud800"
    assert encodable("a\udc80b").encode("utf-8") == b"a\\udc80b"


def test_a_running_id_holding_a_lone_surrogate_is_shown_escaped_never_a_500(
        app: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any) -> None:
    plant_worker(app, fake_redis, clock, running_ids='["\\udc80", "fine-id"]')
    dashboard = Dashboard(app)
    status, _, page = call(dashboard, "/worker/ghost")
    assert status == "200 OK"
    assert "\\udc80" in page and 'href="/task/fine-id"' in page
    assert 'href="/task/%5Cudc80"' in page  # the link carries the escape, UTF-8 can
    for path in ("/workers", "/api/workers", "/api/worker/ghost"):
        assert call(dashboard, path)[0] == "200 OK", path
    assert json.loads(call(dashboard, "/api/worker/ghost")[2])["running_ids"][0] == "\udc80"


def test_a_form_field_holding_a_lone_surrogate_is_posted_back_escaped(
        app: Minitask) -> None:
    dashboard = Dashboard(app)
    form = f"csrf={dashboard.csrf_token}&task_id=%5Cudc80&back=/dead"
    status, _, page = call(dashboard, "/actions/requeue", "POST", form)
    assert status == "200 OK" and 'value="\\udc80"' in page
    rendered = dashboard._templates.from_string(
        '<a href="/task/{{ v|segment }}"><input value="{{ v|field }}">{{ v }}</a>'
    ).render(v="x\udc80")
    assert rendered.encode("utf-8") == (b'<a href="/task/x%5Cudc80"><input value="x\\udc80">'
                                        b"x\\udc80</a>")


def test_json_output_and_json_log_lines_carry_a_lone_surrogate_as_its_escape(
        capsys: pytest.CaptureFixture[str]) -> None:
    emit_json({"running_ids": ["\udc80"]})
    out = capsys.readouterr().out
    out.encode("utf-8")  # stdout can write it
    assert json.loads(out) == {"running_ids": ["\udc80"]}
    record = logging.LogRecord("minitask", logging.INFO, __file__, 1, "id %s", ("\udc80",),
                               None)
    line = JsonFormatter().format(record)
    line.encode("utf-8")
    assert json.loads(line)["message"] == "id \udc80"
