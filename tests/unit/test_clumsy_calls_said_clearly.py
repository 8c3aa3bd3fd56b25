"""Small misleading errors of clumsy calls (issue 29, probe31 L2): a task made of a
``functools.partial`` (no ``__qualname__``) raised a raw AttributeError and now
asks for ``name=``, with which it runs; ``remove_schedule(None)`` blamed the broker
and now names the argument; ``minitask dead purge`` with neither ids nor ``--all``
said "(not both)" and now says none was given; ``-Q default,default`` served the
queue twice and now serves each queue once, in the order first named."""
from __future__ import annotations

import functools
from typing import Any, List

import pytest

from minitask import ConfigurationError, Minitask
from minitask.cli import dead as dead_command
from minitask.cli import worker as worker_command
from tests.support.cli import operate_with, run


def add(x: int, y: int) -> int:
    return x + y


class Doubler:
    def __call__(self, x: int) -> int:
        return 2 * x


@pytest.mark.parametrize("func", [functools.partial(add, 1), Doubler()],
                         ids=["partial", "callable object"])
def test_a_callable_without_a_qualname_asks_for_a_name_and_runs_with_one(
        app: Minitask, func: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.task(func)
    assert str(caught.value) == (
        f"@app.task on a {type(func).__name__} object: it has no __qualname__ to name the "
        f"task after; pass name=... (a functools.partial or a callable object runs as a "
        f"task once named)")
    task = app.task(func, name="named")
    handle = task.delay(3)
    assert app.worker().run_once()
    assert handle.get(timeout=1) == func(3)


@pytest.mark.parametrize("name", [None, "", 5])
def test_remove_schedule_refuses_a_name_that_is_no_name(app: Minitask, name: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.remove_schedule(name)
    assert str(caught.value) == (f"remove_schedule: name must be a schedule's name, a "
                                 f"non-empty str, got {name!r}")
    assert app.remove_schedule("no such schedule") is False


@pytest.mark.parametrize("action", ["purge", "requeue"])
def test_dead_purge_with_nothing_to_act_on_says_none_was_given(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        action: str) -> None:
    operate_with(app, monkeypatch, dead_command)
    code, out = run(capsys, "dead", "-A", "test", action)
    assert code != 0
    assert (f"{action} takes the task ids of the dead letters to {action}, or --all for "
            f"every one; none was given") in out, out
    assert "not both" not in out
    code, out = run(capsys, "dead", "-A", "test", action, "some-id", "--all", "--yes")
    assert code != 0 and f"{action} takes task ids, or --all (not both)" in out, out


def test_worker_queues_named_twice_are_served_once_in_order(
        app: Minitask, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    @app.task(queue="emails")
    def send() -> None:
        pass

    asked: List[Any] = []

    class Worker:
        def run(self) -> None:
            pass

    def worker(**options: Any) -> Worker:
        asked.append(options["queues"])
        return Worker()

    operate_with(app, monkeypatch, worker_command)
    monkeypatch.setattr(app, "worker", worker)
    monkeypatch.setattr(worker_command, "exit_past_leftovers", lambda code: None)
    code, _ = run(capsys, "worker", "-A", "test", "-Q", "emails,default, emails,default,,")
    assert code == 0
    assert asked == [["emails", "default"]]
