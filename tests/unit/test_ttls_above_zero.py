"""A ttl or time limit of 0 (or below, NaN, infinite, no number) is refused, by the
app, by a task's own option and by the app's broadcast options alike, naming the
task (or app) and the value (probe 13 L2: ``@app.task(result_ttl=0)`` was taken, and
its results were gone as they were written)."""
from __future__ import annotations

import math
from typing import Any

import pytest

from minitask import ConfigurationError, Minitask

BAD = [0, 0.0, -1, -0.5, math.nan, math.inf, -math.inf, "10", True]


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("option", ["result_ttl", "timeout"])
def test_a_tasks_ttl_or_limit_not_above_zero_is_refused_naming_task_and_value(
        app: Minitask, option: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.task(name="t.kept", **{option: value})(lambda: None)
    text = str(caught.value)
    assert "task 't.kept'" in text and f"{option} must be a finite number of seconds " \
        f"above 0" in text and f"got {value!r}" in text, text
    assert "t.kept" not in app.tasks


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("option", ["result_ttl", "broadcast_ttl"])
def test_the_apps_ttls_not_above_zero_are_refused_alike(option: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Minitask("ttls", broker="redis://127.0.0.1:1/0", **{option: value})
    text = str(caught.value)
    assert "app 'ttls'" in text and f"{option} must be a finite number of seconds above 0" \
        in text and f"got {value!r}" in text, text


def test_a_small_ttl_and_limit_above_zero_are_taken(app: Minitask) -> None:
    task = app.task(name="t.brief", result_ttl=0.001, timeout=0.01)(lambda: None)
    assert task.options.result_ttl == 0.001 and task.options.timeout == 0.01
