"""Flow control options (guide/flow-control): checked at decoration or call time, nothing written
on bad input; the async twins take the same options; ``minitask tasks`` shows them."""
from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable, Dict, List

import fakeredis
import pytest

from minitask import ConfigurationError, Minitask, TaskFailed
from minitask.cli.main import main
from minitask.broker.keys import QueueKeys
from minitask.limits import TaskLimits, pack, task_limits
from tests.support.clock import ManualClock
from tests.support.draining import drain


@pytest.mark.parametrize("rate, count, window_ms", [
    ("20/s", 20, 1000), ("100/m", 100, 60_000), ("3/h", 3, 3_600_000), (" 5 / s ", 5, 1000)])
def test_rate_limits_are_read_per_second_minute_or_hour(rate: str, count: int,
                                                        window_ms: int) -> None:
    limits = task_limits({"rate_limit": rate}, "task 't'")
    assert (limits.rate_count, limits.rate_window_ms) == (count, window_ms)


@pytest.mark.parametrize("options", [
    {"rate_limit": "fast"}, {"rate_limit": "0/s"}, {"rate_limit": "10/d"},
    {"rate_limit": "-1/s"}, {"rate_limit": 10}, {"rate_limit": "1.5/s"},
    {"max_running": 0}, {"max_running": -1}, {"max_running": 1.5}, {"max_running": True},
    {"max_running": "2"}])
def test_bad_limits_are_refused_when_the_decorator_runs(options: Dict[str, Any]) -> None:
    app = Minitask("t", broker=fakeredis.FakeRedis())
    with pytest.raises(ValueError, match="task 'job'"):
        app.task(name="job", **options)(lambda: None)
    assert "job" not in app.tasks


def _app(clock: ManualClock) -> Minitask:
    return Minitask("t", broker=fakeredis.FakeRedis(server=fakeredis.FakeServer()),
                    clock=clock)


@pytest.mark.parametrize("options", [
    {"debounce": 5},  # no task_id
    {"debounce": 0, "task_id": "x"}, {"debounce": -1, "task_id": "x"},
    {"debounce": float("nan"), "task_id": "x"}, {"debounce": "5", "task_id": "x"},
    {"debounce": 5, "task_id": "x", "delay": 3},
    {"expires": -1}, {"expires": 0}, {"expires": float("inf")}, {"expires": "soon"},
    {"expires": dt.datetime(2030, 1, 1)},  # naive
    {"expires": dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc)},  # past
    {"limit_key": ""}, {"limit_key": 5}, {"limit_key": "a\nb"}])
def test_bad_call_options_are_refused_and_nothing_is_written(
        clock: ManualClock, options: Dict[str, Any]) -> None:
    app = _app(clock)

    @app.task(rate_limit="5/s")
    def job(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="task '"):
        job.apply_async((1,), **options)
    assert app.broker.client.keys("*") == []


def test_the_async_twin_takes_the_same_options_and_checks(clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    app = Minitask("t", broker=fakeredis.FakeRedis(server=server),
                   async_broker=fakeredis.FakeAsyncRedis(server=server), clock=clock)
    ran: List[int] = []

    @app.task(max_running=1, name="job")
    def job(n: int) -> None:
        ran.append(n)

    async def produce() -> List[Any]:
        keyed = await job.aapply_async((1,), limit_key="tenant")
        gone = await job.aapply_async((2,), expires=1)
        for n in (3, 4):
            latest = await job.aapply_async((n,), task_id="d", debounce=1)
        with pytest.raises(ValueError, match="debounce"):
            await job.aapply_async((5,), debounce=1)
        return [keyed, gone, latest]

    keyed, gone, latest = asyncio.run(produce())
    flow = app.broker.client.hgetall(QueueKeys("t", "default").flow)
    assert flow[keyed.id.encode()].startswith(b"3:job:tenant\n")
    clock.advance(1.5)
    assert drain(app.worker()) == 2
    assert sorted(ran) == [1, 4]
    with pytest.raises(TaskFailed) as failed:
        gone.get(timeout=1)
    assert failed.value.exc_type == "Expired"
    assert latest.get(timeout=1) is None


def test_tasks_without_flow_options_write_no_spec(clock: ManualClock) -> None:
    app = _app(clock)

    @app.task
    def job(n: int) -> int:
        return n

    job.delay(1)
    job.apply_async((2,), task_id="x")
    assert app.broker.client.exists(QueueKeys("t", "default").flow) == 0
    assert pack("job", TaskLimits()) is None


def test_misplaced_flow_option_is_named_as_unknown(clock: ManualClock) -> None:
    app = _app(clock)

    @app.task
    def job(n: int) -> int:
        return n

    with pytest.raises(ConfigurationError, match="limit_key"):
        job.apply_async((1,), rate_limit="5/s")  # a task option, not a call's


def test_minitask_tasks_shows_the_limits(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", "redis://127.0.0.1:1/0")  # never connected
    assert main(["tasks", "-A", "tests.apps.flow", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["tasks"]}
    assert rows["tests.apps.flow.paced"]["rate_limit"] == "20/s"
    assert rows["tests.apps.flow.held"]["max_running"] == 2
    assert rows["tests.apps.flow.plain"]["rate_limit"] is None
    assert main(["tasks", "-A", "tests.apps.flow"]) == 0
    table = capsys.readouterr().out
    assert "20/s" in table and "max 2" in table


def test_limits_are_on_the_task_options(clock: ManualClock) -> None:
    app = _app(clock)
    decorate: Callable[..., Any] = app.task(rate_limit="7/m", max_running=3, name="job")
    job = decorate(lambda: None)
    assert job.options.limits == TaskLimits("7/m", 7, 60_000, 3)


def test_the_docs_example_runs(clock: ManualClock) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    readme = (docs / "guide" / "flow-control.rst").read_text()
    section = readme[readme.index("Flow control\n============"):]
    lines = section[section.index(".. code-block:: python"):].splitlines()[2:]
    block = []
    for line in lines:
        if line and not line.startswith("   "):
            break
        block.append(line[3:])
    source = "\n".join(block).replace("from minitask import Minitask\n", "")
    server = fakeredis.FakeServer()

    def on_fake_redis(name: str, broker: Any = None, **options: Any) -> Minitask:
        return Minitask(name, broker=fakeredis.FakeRedis(server=server), clock=clock, **options)

    namespace: Dict[str, Any] = {"__name__": "readme", "Minitask": on_fake_redis}
    exec(compile(source, "flow-control.rst", "exec"), namespace)
    app = namespace["app"]
    specs = app.broker.flow.specs("default")
    assert len(specs) == 3
    assert specs["digest-7"].endswith("\n1")  # debounced
    assert app.handle("digest-7").status() == "scheduled"
