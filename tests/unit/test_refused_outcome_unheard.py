"""An outcome Redis refuses for the queue's own data is given up (the task runs again
when its lease expires): nobody is told it was recorded (review 14: the worker logged
"succeeded" or "attempt N in ... s", and told its listeners, of an outcome Redis never
took), for a success, a retry and a dead letter alike."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.draining import drain

REFUSAL = BrokerError("minitask script refused: WRONGTYPE minitask key k holds another "
                      "type; nothing was changed", reason="script")


def refuse(*_: Any, **__: Any) -> Any:
    raise REFUSAL


@pytest.mark.parametrize("ends", ["succeeded", "retrying", "failed"])
def test_a_refused_outcome_is_said_once_and_told_to_nobody(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        ends: str) -> None:
    @app.task(name="t", retries=1 if ends == "retrying" else 0)
    def t() -> str:
        if ends != "succeeded":
            raise ValueError("boom")
        return "ok"

    results = app.broker.results
    write = {"succeeded": "ack_many", "retrying": "retry", "failed": "bury"}[ends]
    monkeypatch.setattr(results, write, refuse)
    heard: List[str] = []
    worker = app.worker(burst=True)
    worker._outcomes.listeners.append(lambda job, outcome: heard.append(outcome.status))
    handle = t.delay()
    with caplog.at_level(logging.INFO):
        drain(worker)
    assert heard == [], heard
    said = [r.getMessage() for r in caplog.records]
    assert any("could not" in line and handle.id in line for line in said), said
    assert not any(f"{handle.id} t succeeded" in line or "attempt 2 in" in line
                   for line in said), said
