"""What a person reads is true and bounded: the worker's text log escapes a task's
exception text in its traceback; a group weight or pause for a queue the app does
not have is refused naming it; the dashboard's questions say when a task or a dead
letter is not there; an unreadable schedule's message repeats a foreign cron cut;
a group given as an int too long to be a name is refused naming the task."""
from __future__ import annotations

import html
import json
import logging
import sys
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_listing
from minitask.broker.keys import queue_keys
from minitask.cli.logs import TextFormatter
from minitask.dashboard.web import Dashboard
from minitask.errors import ArgumentError, ConfigurationError
from minitask.limits import MAX_GROUP_LENGTH
from minitask.periodic import SHOWN_CHARS
from tests.support.draining import drain
from tests.unit.test_dashboard import call


def test_the_text_log_escapes_an_exceptions_text_in_its_traceback() -> None:
    def boom() -> None:
        try:
            raise KeyError("inner \x1b[2J")
        except KeyError as exc:
            raise ValueError("boom \x1b[31mred\x1b[0m\nforged line") from exc

    try:
        boom()
    except ValueError:
        info = sys.exc_info()
    record = logging.LogRecord("minitask", logging.ERROR, __file__, 1, "task failed", (), info)
    text = TextFormatter("%(message)s").format(record)
    assert "\x1b" not in text
    lines = text.splitlines()
    assert "ValueError: boom \\x1b[31mred\\x1b[0m\\x0aforged line" in lines
    assert "KeyError: 'inner \\x1b[2J'" in lines
    assert not any(line.startswith("forged line") for line in lines)
    assert any(line.startswith("  File ") for line in lines)  # the frames keep their lines


def test_a_group_weight_or_pause_for_a_queue_the_app_has_not_is_refused(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    app.task(name="t", queue="default")(lambda: None)
    for call_it in (lambda: app.set_group_weight("defualt", "g", 2),
                    lambda: app.pause_group("defualt", "g"),
                    lambda: app.resume_group("defualt", "g")):
        with pytest.raises(ConfigurationError, match="has no queue 'defualt'; did you mean "
                                                     "'default'"):
            call_it()
    assert fake_redis.keys("*defualt*") == []
    app.set_group_weight("default", "g", 2)  # a queue it declares
    fake_redis.sadd(f"minitask:{{{app.name}}}:queues", "used")
    app.pause_group("used", "g")  # a queue it has used (its registry)


def test_the_questions_say_when_the_task_or_the_dead_letter_is_not_there(
        app: Minitask) -> None:
    dashboard = Dashboard(app)
    for path, form, said in (
            ("/actions/cancel", "task_id=nosuch", "Task nosuch is unknown to app 'test' "
             "(never sent, or expired with its results): there is nothing to cancel"),
            ("/actions/cancel", "task_id=nosuch&running=1", "there is nothing to cancel"),
            ("/actions/requeue", "task_id=nosuch", "nosuch is no dead letter (of the queues "
             "a lookup asks): there is nothing to requeue"),
            ("/actions/purge-dead", "task_id=nosuch", "there is nothing to purge")):
        status, _, page = call(dashboard, path, "POST", f"csrf={dashboard.csrf_token}&{form}")
        assert status == "200 OK", path
        assert said in html.unescape(page), path
        assert "goes back to the tail" not in page and "deleted for good" not in page


def test_the_questions_still_say_what_happens_to_a_dead_letter_that_is_there(
        app: Minitask) -> None:
    @app.task(name="boom", retries=0)
    def boom() -> None:
        raise ValueError("no")

    handle = boom.delay()
    drain(app.worker(["default"]))
    dashboard = Dashboard(app)
    form = f"csrf={dashboard.csrf_token}&task_id={handle.id}"
    assert "goes back to the tail" in call(dashboard, "/actions/requeue", "POST", form)[2]
    assert "deleted for good" in call(dashboard, "/actions/purge-dead", "POST", form)[2]


def test_an_unreadable_schedules_message_repeats_a_foreign_cron_cut(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    app.task(name="tick")(lambda: None)
    app.add_schedule("nightly", "tick", cron="0 3 * * *")
    key = queue_keys(app.name, "default").schedules
    head, _, body = fake_redis.hget(key, "nightly").partition(b"\n")  # type: ignore[union-attr]
    timing = json.loads(head)
    timing["cron"] = "1-59/1," * 5000
    fake_redis.hset(key, "nightly", json.dumps(timing).encode() + b"\n" + body)
    found, unreadable = schedule_listing(app)
    (entry,) = unreadable
    assert "cron '1-59/1," in entry["problem"] and "(35,000 characters)" in entry["problem"]
    assert len(entry["problem"]) < 4 * SHOWN_CHARS + 400


def test_a_group_given_as_an_int_too_long_for_a_name_is_refused_naming_the_task(
        app: Minitask) -> None:
    @app.task(name="grate", group_by="customer")
    def grate(customer: Any, n: int) -> None:
        pass

    @app.task(name="plain")
    def plain(n: int) -> None:
        pass

    too_long = f"an int of .* bits, longer than {MAX_GROUP_LENGTH} digits"
    for group in (10 ** 5000, -10 ** 5000, 10 ** MAX_GROUP_LENGTH):
        with pytest.raises(ArgumentError, match=f"task 'grate': .*{too_long}"):
            grate.delay(group, 1)
        with pytest.raises(ConfigurationError, match=f"plain.*{too_long}"):
            plain.apply_async((1,), group=group)
    with pytest.raises(ConfigurationError, match=f"longer than {MAX_GROUP_LENGTH} digits"):
        app.pause_group("default", 10 ** 5000)
    plain.apply_async((1,), group=10 ** MAX_GROUP_LENGTH - 1)  # 200 digits: a name
