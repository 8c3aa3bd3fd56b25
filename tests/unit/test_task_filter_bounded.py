"""A listing's task filter (``inspect --task``, the dashboard's ``?task=``) is bounded:
longer than any task name, it is refused with its length (400, exit 2); a glob is
compiled into a small cache of its own. Before, fnmatch's cache kept up to 32,768
compiled globs of any length: 300 globs of 60 kB grew a dashboard by 317 MB, for good."""
from __future__ import annotations

import fnmatch
from typing import Callable, Tuple

import pytest

from minitask import ConfigurationError, Minitask
from minitask.admin import activity
from minitask.admin.activity import GLOBS_KEPT, PATTERN_MOST, recent, running, scheduled
from minitask.cli import inspect
from minitask.dashboard.web import Dashboard
from tests.support.cli import operate_with, run
from tests.support.draining import drain
from tests.unit.test_dashboard import call
from tests.unit.test_operators_view import Tasks, tasks_of

LONG = "a" * 60_000 + "*"


@pytest.fixture
def shop(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Tasks]:
    app = make_app("shop")
    tasks = tasks_of(app)
    tasks["add"].delay(1, 2)
    tasks["boom"].delay()
    tasks["add"].apply_in(60, 3, 4)
    drain(app.worker(["default"]))
    return app, tasks


def test_many_distinct_globs_stay_within_a_small_cache(shop: Tuple[Minitask, Tasks]) -> None:
    app, _ = shop
    stdlib = fnmatch._compile_pattern.cache_info().currsize  # type: ignore[attr-defined]
    dashboard = Dashboard(app)
    for n in range(1, GLOBS_KEPT * 4):
        globbed = f"shop.{'x' * n}*"
        assert recent(app, task=globbed).tasks == []
        assert scheduled(app, task=globbed).tasks == []
        status, _, text = call(dashboard, f"/api/recent?task={globbed}")
        assert status == "200 OK", text
        assert activity._glob.cache_info().currsize <= GLOBS_KEPT
    # nothing went into fnmatch's own cache (32,768 patterns of any length)
    assert fnmatch._compile_pattern.cache_info().currsize == stdlib  # type: ignore[attr-defined]
    # and a glob still finds what it names
    assert {entry.name for entry in recent(app, task="shop.b*").tasks} == {"shop.boom"}
    assert [item.name for item in scheduled(app, task="shop.[a]dd").tasks] == ["shop.add"]


def test_a_filter_longer_than_any_task_name_is_refused_by_its_length(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, _ = shop
    longest = "s" * PATTERN_MOST
    assert recent(app, task=longest).tasks == []  # as long as a name can be: taken
    for listing in (recent, running, scheduled):
        with pytest.raises(ConfigurationError) as refused:
            listing(app, task=longest + "*")
        assert f"of {PATTERN_MOST + 1:,} characters" in str(refused.value)
        assert f"at most {PATTERN_MOST:,} characters" in str(refused.value)


@pytest.mark.parametrize("path", ["/api/recent", "/api/running", "/api/scheduled", "/recent"])
def test_the_dashboard_answers_400_to_an_overlong_filter(
        shop: Tuple[Minitask, Tasks], path: str) -> None:
    app, _ = shop
    status, _, text = call(Dashboard(app), f"{path}?task={LONG}")
    assert status == "400 Bad Request", text[:300]
    assert "task name or glob of 60,001 characters" in text, text[:300]
    assert "a" * 100 not in text  # said by its length, not echoed


def test_inspect_refuses_an_overlong_task_filter_as_a_bad_argument(
        shop: Tuple[Minitask, Tasks], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = shop
    operate_with(app, monkeypatch, inspect)
    code, text = run(capsys, "inspect", "-A", "app", "recent", "--task", LONG)
    assert code == 2, text[:300]
    assert "minitask: error: task name or glob of 60,001 characters" in text, text[:300]
    assert len(text) < 400
