"""``minitask worker -Q`` naming a queue no task of the app declares (``defualt``) says
so, with the app's queues and the closest one; the worker still serves it."""
from __future__ import annotations

import logging

import pytest

from minitask import Minitask
from minitask.worker.served import warn_if_undeclared


def test_an_undeclared_queue_is_named_with_the_closest_declared_one(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(queue="emails")
    def send() -> None:
        pass

    with caplog.at_level(logging.WARNING, logger="minitask.worker.served"):
        warn_if_undeclared(app, "default")
        warn_if_undeclared(app, "emails")
        assert caplog.records == []
        warn_if_undeclared(app, "defualt")
    (record,) = caplog.records
    text = record.getMessage()
    assert "queue 'defualt' is the queue of no task of app 'test'" in text
    assert "(its queues: default, emails)" in text and "did you mean 'default'?" in text
