"""``soft_timeout``: checked when the decorator runs, shown by ``minitask tasks``."""
from __future__ import annotations

import json
import logging
from typing import Any, Dict

import pytest

from minitask import ConfigurationError, Minitask, SoftTimeLimitExceeded
from minitask.cli import main
from minitask.worker.loop import log_banner

NAN, INF = float("nan"), float("inf")


def test_soft_timeout_is_kept_beside_timeout(app: Minitask) -> None:
    @app.task(timeout=10, soft_timeout=7.5)
    def both() -> None:
        pass

    @app.task(soft_timeout=3)
    def soft_only() -> None:
        pass

    assert (both.options.timeout, both.options.soft_timeout) == (10.0, 7.5)
    assert (soft_only.options.timeout, soft_only.options.soft_timeout) == (None, 3.0)
    assert app.tasks[both.name].options.soft_timeout == 7.5


@pytest.mark.parametrize("options,words", [
    ({"soft_timeout": 0}, "above 0"),
    ({"soft_timeout": -1}, "soft_timeout"),
    ({"soft_timeout": NAN}, "soft_timeout"),
    ({"soft_timeout": INF}, "soft_timeout"),
    ({"soft_timeout": "5"}, "soft_timeout"),
    ({"soft_timeout": True}, "soft_timeout"),
    ({"soft_timeout": 60, "timeout": 60}, "below timeout"),
    ({"soft_timeout": 61, "timeout": 60}, "below timeout"),
], ids=repr)
def test_a_bad_soft_timeout_is_refused_naming_the_task(app: Minitask, options: Dict[str, Any],
                                                       words: str) -> None:
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError) as caught:
        app.task(name="jobs.limited", **options)(job)
    assert "jobs.limited" in str(caught.value) and words in str(caught.value)
    assert app.tasks == {}


def test_the_exception_names_the_task_and_carries_its_limit() -> None:
    error = SoftTimeLimitExceeded("task 'a' ran past its soft timeout", task_name="a", limit=2.0)
    assert (error.task_name, error.limit) == ("a", 2.0)
    assert isinstance(error, Exception), "a task's except Exception catches it, as in Celery"


def test_minitask_tasks_shows_the_soft_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "-A", "tests.apps.soft", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["tasks"]}
    assert rows["tests.apps.soft.cleans_up"]["soft_timeout"] == 0.5
    assert rows["tests.apps.soft.cleans_up"]["timeout"] == 30.0
    assert rows["tests.apps.soft.nap"]["soft_timeout"] is None

    assert main(["tasks", "-A", "tests.apps.soft"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("task "))
    row = next(line for line in lines if line.startswith("tests.apps.soft.cleans_up "))
    end = header.index("soft") + len("soft")
    assert row[end - 3:end] == "0.5", (header, row)


def test_the_banner_warns_of_soft_limits_threads_cannot_interrupt(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(name="jobs.plain", soft_timeout=1)
    def plain() -> None:
        pass

    @app.task(name="jobs.coro", soft_timeout=1)
    async def coro() -> None:
        pass

    for pool, warned in (("thread", True), ("asyncio", True), ("process", False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="minitask.worker.loop"):
            log_banner(app.worker(pool=pool))
        soft = [r.getMessage() for r in caplog.records if "soft timeout" in r.getMessage()]
        assert bool(soft) == warned, (pool, soft)
        assert all("jobs.plain" in text and "jobs.coro" not in text for text in soft)
