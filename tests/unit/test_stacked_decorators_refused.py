"""A decorator stacked on ``@app.task`` (or ``@app.periodic``) gets the Task, not the
function: a ConfigurationError names the task and says how to write it, never a raw
AttributeError, and nothing is registered by the refused decorator."""
from __future__ import annotations

from typing import Any, Callable

import fakeredis
import pytest

from minitask import ConfigurationError, Minitask


def _app() -> Minitask:
    return Minitask("t", broker=fakeredis.FakeRedis(server=fakeredis.FakeServer()))


def _periodic_on_task(app: Minitask) -> Callable[..., Any]:
    @app.periodic(every=30)
    @app.task(name="tick")
    def tick() -> int:
        return 1
    return tick


def _task_on_periodic(app: Minitask) -> Callable[..., Any]:
    @app.task
    @app.periodic(every=30, name="tick")
    def tick() -> int:
        return 1
    return tick


def _task_options_on_task(app: Minitask) -> Callable[..., Any]:
    @app.task(queue="other")
    @app.task(name="tick")
    def tick() -> int:
        return 1
    return tick


@pytest.mark.parametrize("stack, decorator", [
    (_periodic_on_task, "@app.periodic"),
    (_task_on_periodic, "@app.task"),
    (_task_options_on_task, "@app.task"),
])
def test_a_decorator_stacked_on_a_task_names_it_and_says_how(
        stack: Callable[[Minitask], Any], decorator: str) -> None:
    app = _app()
    with pytest.raises(ConfigurationError) as raised:
        stack(app)
    text = str(raised.value)
    assert text.startswith(f"{decorator} was applied to the task 'tick', not to a function")
    assert "@app.periodic(every=" in text and "app.add_schedule(name, task" in text
    assert set(app.tasks) == {"tick"}


def test_periodic_on_a_task_registers_no_schedule() -> None:
    app = _app()
    with pytest.raises(ConfigurationError):
        _periodic_on_task(app)
    assert app.periodic_schedules == {}


def test_one_periodic_decorator_still_registers_task_and_schedule() -> None:
    app = _app()

    @app.periodic(every=30, queue="maintenance")
    def sweep() -> int:
        return 1

    assert sweep.name in app.tasks and sweep.name in app.periodic_schedules
