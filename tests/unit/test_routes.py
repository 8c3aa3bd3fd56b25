"""Routes: task names or glob patterns mapped to a queue and a priority, in one place.
The first route that matches gives its options (exact names and globs alike, in the
order given); a task's own decorator options win over its route, and a call's options
over both; a bad route is refused when the app is made, naming it; workers serve the
queues routes send to; ``minitask tasks`` shows the route of each task."""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import queue_keys
from minitask.cli import main
from minitask.wire.serializer import decode_message
from tests.support.draining import drain

ROUTES: Dict[str, Dict[str, Any]] = {
    "billing.refund": {"queue": "refunds"},
    "billing.*": {"queue": "billing", "priority": 7},
    "*.report?": {"priority": 1},
    "mail.[ab]*": {"queue": "mail"},
    "audit.skip": {},
    "audit.*": {"queue": "audit"},
}


@pytest.mark.app(on="offline", routes=ROUTES)
@pytest.mark.parametrize("name, pattern, options", [
    ("billing.refund", "billing.refund", {"queue": "refunds"}),  # before the glob: it wins
    ("billing.charge", "billing.*", {"queue": "billing", "priority": 7}),
    ("billing.eu.charge", "billing.*", {"queue": "billing", "priority": 7}),  # * spans dots
    ("sales.reports", "*.report?", {"priority": 1}),
    ("sales.report", None, {}),  # ? needs one character
    ("mail.alert", "mail.[ab]*", {"queue": "mail"}),
    ("mail.cancel", None, {}),
    ("Billing.charge", None, {}),  # case matters
    ("billing", None, {}),
    ("audit.skip", "audit.skip", {}),  # an empty route stops the search: the defaults
    ("audit.login", "audit.*", {"queue": "audit"}),
])
def test_the_first_matching_route_gives_its_options(app: Minitask, name: str, pattern: Any,
                                                    options: Dict[str, Any]) -> None:
    assert app.routes.match(name) == (pattern, options)


@pytest.mark.app(on="offline", routes={"billing.*": {"queue": "billing", "priority": 7},
                                       "billing.refund": {"queue": "refunds"}})
def test_an_exact_name_after_a_glob_that_matches_it_is_never_reached(app: Minitask) -> None:
    assert app.routes.match("billing.refund") == ("billing.*",
                                                  {"queue": "billing", "priority": 7})


@pytest.mark.app(on="offline", routes=ROUTES)
def test_a_decorator_option_wins_over_the_route_and_fills_in_the_rest(app: Minitask) -> None:
    @app.task(name="billing.charge")
    def charge() -> None: ...

    @app.task(name="billing.urgent", priority=9)
    def urgent() -> None: ...

    @app.task(name="billing.moved", queue="elsewhere", priority=2)
    def moved() -> None: ...

    @app.task(name="plain")
    def plain() -> None: ...

    @app.task(name="audit.skip")
    def skipped() -> None: ...

    seen = {name: (t.queue, t.priority, t.options.route) for name, t in app.tasks.items()}
    assert seen == {"billing.charge": ("billing", 7, "billing.*"),
                    "billing.urgent": ("billing", 9, "billing.*"),
                    "billing.moved": ("elsewhere", 2, None),  # overrides all: no route
                    "plain": ("default", 5, None),
                    "audit.skip": ("default", 5, "audit.skip")}


@pytest.mark.app(routes={"billing.*": {"queue": "billing", "priority": 7}})
def test_a_call_option_wins_over_the_route(app: Minitask,
                                           fake_redis: "redis.Redis[bytes]") -> None:
    @app.task(name="billing.charge")
    def charge(cents: int) -> int:
        return cents

    routed = charge.delay(1)
    moved = charge.apply_async((2,), queue="urgent", priority=9)
    for queue, handle, priority in (("billing", routed, 7), ("urgent", moved, 9)):
        body = fake_redis.hget(queue_keys("test", queue).messages, handle.id)
        assert body is not None and decode_message(body).priority == priority
    assert drain(app.worker(burst=True)) == 1  # the routed queue is served by default
    assert routed.get(timeout=0) == 1


@pytest.mark.app(on="offline", routes={"billing.*": {"queue": "billing"},
                                       "mail.send": {"queue": "mail", "priority": 3},
                                       "x": {"priority": 4}})
def test_workers_serve_the_queues_routes_send_to_even_with_no_task_of_them(
        app: Minitask) -> None:
    @app.task(queue="own")
    def own() -> None: ...

    assert app.worker_queues() == ["default", "billing", "mail", "own"]


@pytest.mark.parametrize("routes, problem", [
    (["billing.*"], "routes must be a mapping of task names or glob patterns"),
    ({"": {"queue": "q"}}, "route pattern must be a non-empty str"),
    ({3: {"queue": "q"}}, "route pattern must be a non-empty str, got 3"),
    ({"a.\x1b": {"queue": "q"}}, "route pattern 'a.\\\\x1b' holds"),
    ({"billing.*": "billing"}, "route 'billing.\\*': its options must be a mapping"),
    ({"billing.*": {"qeue": "billing"}}, "route 'billing.\\*': unknown option.*'qeue'.*"
                                         "sets priority and queue"),
    ({"billing.*": {"queue": "bill{ing}"}}, "route 'billing.\\*': queue name"),
    ({"billing.*": {"queue": 5}}, "route 'billing.\\*': queue name must be a str"),
    ({"billing.*": {"priority": 10}}, "route 'billing.\\*': priority must be an int from 0"),
    ({"billing.*": {"priority": True}}, "route 'billing.\\*': priority must be an int"),
])
def test_a_bad_route_is_refused_when_the_app_is_made(routes: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as refused:
        Minitask("shop", broker="redis://127.0.0.1:1/0", routes=routes)
    assert str(refused.value).startswith("app 'shop': ")


def test_the_tasks_command_shows_each_task_s_route_and_every_route(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "-A", "tests.apps.routed"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("task "))
    assert header.split() == ["task", "queue", "prio", "retries", "timeout", "soft", "retry", "on",
                              "limits", "route"]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("routed.")}
    assert rows["routed.billing.charge"][1:3] == ["billing", "7"]
    assert rows["routed.billing.charge"][-1] == "routed.billing.*"
    assert rows["routed.plain"][-1] == "-"
    routes = lines[lines.index(next(line for line in lines if line.startswith("pattern"))) + 1:]
    assert [line.split() for line in routes if line] == [
        ["routed.billing.*", "billing", "7"], ["routed.remote.*", "remote", "-"]]


def test_the_tasks_command_gives_routes_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "-A", "tests.apps.routed", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    routes = {row["name"]: row["route"] for row in shown["tasks"]}
    assert routes["routed.billing.charge"] == "routed.billing.*"
    assert routes["routed.plain"] is None
    assert shown["routes"] == [
        {"pattern": "routed.billing.*", "queue": "billing", "priority": 7},
        {"pattern": "routed.remote.*", "queue": "remote"}]


@pytest.mark.app(on="offline", routes={"billing.*": {"queue": "billing", "priority": 7}})
def test_a_periodic_task_s_schedule_goes_where_its_route_sends_it(app: Minitask) -> None:
    @app.periodic(every=60, name="billing.nightly")
    def nightly() -> None: ...

    schedule = app.periodic_schedules["billing.nightly"]
    assert (schedule.queue, schedule.priority) == ("billing", 7)
    assert (nightly.queue, nightly.priority) == ("billing", 7)
