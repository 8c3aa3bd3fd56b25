"""Fair-queue options (guide/fair-queues): checked when the decorator runs or the call
is made, each error naming the task; nothing is written on bad input."""
from __future__ import annotations

import json
from typing import Any, Dict

import fakeredis
import pytest

from minitask import ArgumentError, ConfigurationError, Minitask
from minitask.limits import pack, task_grouping


def _app() -> Minitask:
    return Minitask("t", broker=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


@pytest.mark.parametrize("options, match", [
    ({"group_by": "nobody"}, "group_by must name a parameter"),
    ({"group_by": 3}, "group_by must name a parameter"),
    ({"group_max_running": 0}, "group_max_running must be an int"),
    ({"group_max_running": True}, "group_max_running must be an int"),
    ({"group_rate_limit": "fast"}, "group_rate_limit must be"),
    ({"group_by": "tenant", "broadcast": True}, "a broadcast task takes no group_by"),
])
def test_bad_group_options_are_refused_when_the_decorator_runs(
        options: Dict[str, Any], match: str) -> None:
    app = _app()
    with pytest.raises(ConfigurationError, match=f"task 'job': {match}"):
        app.task(name="job", **options)(lambda tenant, n: None)
    assert "job" not in app.tasks


@pytest.mark.parametrize("value", [1.5, None, True, b"acme", "", "a\nb", "x" * 201, ["a"]])
def test_a_group_by_value_that_is_no_str_or_int_is_refused_naming_the_task(
        value: Any) -> None:
    app = _app()

    @app.task(name="job", group_by="tenant")
    def job(tenant: Any, n: int = 0) -> None: ...

    with pytest.raises(ArgumentError, match="task 'job': argument 'tenant' \\(group_by\\)"):
        job.delay(value)
    if value is not None:  # group=None: no group given
        with pytest.raises(ConfigurationError, match="task 'job': group "):
            job.apply_async(("acme",), group=value)
    assert app.broker.transport.client.keys("*") == []


def test_a_missing_group_by_argument_is_an_argument_error() -> None:
    app = _app()

    @app.task(name="job", group_by="tenant")
    def job(n: int, tenant: str) -> None: ...

    with pytest.raises(ArgumentError, match="task 'job'"):
        job.delay(1)
    assert app.broker.transport.client.keys("*") == []


def test_ints_and_defaults_make_groups_and_a_call_group_wins() -> None:
    app = _app()

    @app.task(name="job", group_by="tenant")
    def job(n: int, tenant: Any = "house") -> None: ...

    specs = app.broker.flow.specs
    job.delay(1, 42)
    job.delay(2)
    job.apply_async((3, 42), group="acme")
    found = sorted(spec.rsplit("\n", 1)[1] for spec in specs("default").values())
    assert found == ["42", "acme", "house"]


def test_a_plain_call_of_a_task_with_group_limits_but_no_group_is_ungrouped() -> None:
    app = _app()

    @app.task(name="job", group_max_running=1)
    def job(n: int) -> None: ...

    job.delay(1)
    assert app.broker.flow.specs("default") == {}  # no spec: the plain path, as before
    job.apply_async((2,), group="acme")
    assert list(app.broker.flow.specs("default").values()) == ["\n0\n0\n0\n0\n0\n1\n0\n0\nacme"]


def test_a_broadcast_call_takes_no_group() -> None:
    app = _app()

    @app.task(name="shout", broadcast=True)
    def shout(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match="task 'shout': a broadcast task takes no group"):
        shout.apply_async((1,), group="a")
    assert app.broker.transport.client.keys("*") == []


def test_a_grouped_spec_goes_on_past_the_flow_spec() -> None:
    grouping = task_grouping({"group_by": "t", "group_max_running": 2,
                              "group_rate_limit": "10/m"}, ["t"], "task 'x'")
    from minitask.limits import TaskLimits
    assert pack("x", TaskLimits(), group="g", grouping=grouping) == \
        "\n0\n0\n0\n0\n0\n2\n10\n60000\ng"
    assert pack("x", TaskLimits()) is None


def test_minitask_tasks_shows_the_group_options(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.apps import fair
    from minitask.cli.main import main

    assert main(["tasks", "-A", "tests.apps.fair"]) == 0
    out = capsys.readouterr().out
    assert "group by group group max 1" in out and "group by tenant" in out
    assert main(["tasks", "-A", "tests.apps.fair", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["tasks"]}
    assert rows[fair.ordered.name]["group_max_running"] == 1
    assert rows[fair.tenant_job.name]["group_by"] == "tenant"


def test_a_send_by_name_takes_a_group() -> None:
    app = _app()
    app.send("elsewhere.job", (1,), group=7)
    assert list(app.broker.flow.specs("default").values()) == ["\n0\n0\n0\n0\n0\n0\n0\n0\n7"]


def test_group_options_combine_with_the_tasks_own_limits_and_limit_key() -> None:
    app = _app()

    @app.task(name="job", group_by="tenant", group_max_running=1, rate_limit="5/s",
              max_running=2)
    def job(tenant: str, n: int) -> None: ...

    job.apply_async(("acme", 1), limit_key="k")
    # the task's limiter first (flow control's), then the group's limits and the group
    assert list(app.broker.flow.specs("default").values()) == [
        "3:job:k\n5\n1000\n2\n0\n0\n1\n0\n0\nacme"]
