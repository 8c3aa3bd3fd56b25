"""Planted messages: a worker dead-letters a message with a bad field and never runs it.

Each body below is what a buggy producer in another language (or a hand in
redis-cli) could write. Before decoding checked every field, some ran the task
with the wrong arguments (``args="ab"`` as ``('a', 'b')``) and some made the
worker's own code raise while building the task context.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.envelopes import NOW_MS, body


@pytest.mark.parametrize("changes, field", [
    ({"args": "ab"}, "args"),
    ({"args": {"a": 1, "b": 2}}, "args"),
    ({"kwargs": [["a", "x"], ["b", "y"]], "args": []}, "kwargs"),
    ({"kwargs": {1: "x"}, "args": ["x"]}, "kwargs"),
    ({"enqueued_at_ms": NOW_MS * 1000}, "enqueued_at_ms"),
    ({"eta_ms": "soon"}, "eta_ms"),
    ({"eta_ms": 2 ** 63 - 1}, "eta_ms"),
    ({"attempt": 0}, "attempt"),
    ({"attempt": 10 ** 18}, "attempt"),
    ({"priority": 42}, "priority"),
    ({"task": ["shop.pair"]}, "task"),
    ({"id": "planted-1\n2030-01-01 00:00:00 INFO forged line"}, "id"),
    ({"queue": "default\x1b[2J"}, "queue"),
], ids=lambda v: repr(v)[:40])
def test_a_planted_message_with_a_bad_field_is_dead_lettered_and_never_runs(
        make_app: Callable[..., Minitask], redis_client: Any, changes: Dict[str, Any],
        field: str) -> None:
    app = make_app("shop")
    ran: List[Any] = []

    @app.task(name="shop.pair")
    def pair(a: Any = None, b: Any = None) -> None:
        ran.append((a, b))

    planted = body(**changes)
    assert app.broker.queues.enqueue("default", [("planted-1", planted, 5, 0)], NOW_MS) == 1
    after = pair.delay("ok", "fine")
    app.worker(burst=True).run()
    assert ran == [("ok", "fine")]  # only the sound message ran
    assert after.status() == "succeeded"
    [dead] = app.dead_letters()
    assert dead.task_id == "planted-1"
    assert dead.reason == "the message cannot be decoded"
    assert dead.exc_type == "DecodeError"
    assert f"field {field!r}" in dead.message, dead.message
    keys = QueueKeys(app.name, "default")
    assert redis_client.hget(keys.messages, "planted-1") == planted  # kept for inspection
    assert redis_client.zcard(keys.leases) == 0


def test_a_sound_planted_message_runs(make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")
    ran: List[Any] = []

    @app.task(name="shop.pair")
    def pair(a: Any, b: Any) -> None:
        ran.append((a, b))

    assert app.broker.queues.enqueue("default", [("planted-1", body(), 5, 0)], NOW_MS) == 1
    app.worker(burst=True).run()
    assert ran == [("x", "y")]
    assert app.handle("planted-1").status() == "succeeded"
