"""drain's error past its limit says which case it met: a backlog larger than the
limit as drain began is said as such ("queue 'default' held 12 tasks ready"), not
asked "does task 'x' keep enqueueing more?" when no task enqueues anything (probe35,
LOW); a task that does keep enqueueing is still named so, and a backlog within the
limit that grows past it by what its tasks enqueue is too."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.testing import drain, isolated


def _app() -> Minitask:
    return Minitask("shop", broker="redis://127.0.0.1:1/0")


def test_a_backlog_larger_than_the_limit_is_said_as_a_backlog() -> None:
    app = _app()

    @app.task(name="plain")
    def plain(x: int) -> int:
        return x

    with isolated(app):
        for i in range(12):
            plain.delay(i)
        with pytest.raises(RuntimeError) as raised:
            drain(app, limit=10)
    said = str(raised.value)
    assert "limit of 10 attempts: queue 'default' held 12 tasks ready as it began" in said
    assert "keep enqueueing" not in said and "drain(limit=...)" in said


def test_a_backlog_over_several_queues_counts_them_all() -> None:
    app = _app()

    @app.task(name="a", queue="one")
    def a() -> None:
        pass

    @app.task(name="b", queue="two")
    def b() -> None:
        pass

    with isolated(app):
        for _ in range(3):
            a.delay()
            b.delay()
        with pytest.raises(RuntimeError, match="2 queues held 6 tasks ready as it began"):
            drain(app, limit=5)


def test_tasks_that_enqueue_more_past_the_limit_are_still_asked_about() -> None:
    app = _app()

    @app.task(name="again")
    def again() -> None:
        app.tasks["again"].delay()

    with isolated(app):
        for _ in range(3):  # a backlog within the limit: its tasks enqueue the rest
            again.delay()
        with pytest.raises(RuntimeError) as raised:
            drain(app, limit=10)
    said = str(raised.value)
    assert "does task 'again'" in said and "keep enqueueing more?" in said
    assert "held" not in said
