"""A step found nowhere whose next step was cancelled did not run for that.

Chain A -> B -> C -> D: A ran and sent B, but A is delivered again (its ack lost);
B was purged before it ran; C was cancelled before it was sent (``cancel()``: its
marker says cancelled). A, run again, finds B's marker there and B nowhere, and asks
what follows B whether B ran: C's "cancelled" marker counted as a sign that it had,
so B was left with no outcome (``get()`` on it waited for ever) and D, which only
B's worker would cancel, was never cancelled (the chain's ``get()`` waited for ever).
A cancelled marker is no such sign now: B ends cancelled, and so does D. A next step
whose marker says sent still shows that B ran (left as it is)."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask import Minitask, TaskFailed, chain
from minitask.broker.keys import queue_keys
from minitask.stores.workflow_reads import frame_of
from minitask.wire.serializer import decode_message

KEYS = queue_keys("test", "default")


@pytest.fixture
def add(app: Minitask) -> Any:
    return app.task(name="add")(lambda x, y: x + y)


def _again(app: Minitask, body: bytes, value: Any) -> None:
    """The step whose message is ``body`` delivered again: it carries its workflow on."""
    frame = frame_of(decode_message(body))
    assert frame is not None
    app.broker.workflows.advance(frame, value, app.clock.now_ms())


def test_a_purged_step_before_a_cancelled_one_ends_cancelled_and_so_does_the_rest(
        app: Minitask, add: Any, fake_redis: "redis.Redis[bytes]") -> None:
    last = chain(add.si(1, 1).set(task_id="a"), add.s(2).set(task_id="b"),
                 add.s(3).set(task_id="c"), add.s(4).set(task_id="d")).delay()
    body = fake_redis.hget(KEYS.messages, "a")
    assert body is not None
    assert app.worker().run_once()  # A runs and sends B
    fake_redis.hdel(KEYS.messages, "b")  # B purged before it ran
    assert app.handle("c").cancel() is True
    _again(app, body, 2)
    assert app.handle("b").status() == "cancelled"
    assert fake_redis.hget(KEYS.once("d"), "state") == b"cancelled"
    with pytest.raises(TaskFailed) as ended:
        last.get(timeout=1)
    assert ended.value.exc_type == "Cancelled", str(ended.value)


def test_a_step_whose_next_step_was_sent_is_left_as_it_is(
        app: Minitask, add: Any, fake_redis: "redis.Redis[bytes]") -> None:
    chain(add.si(1, 1).set(task_id="a"), add.s(2).set(task_id="b"),
          add.s(3).set(task_id="c")).delay()
    body = fake_redis.hget(KEYS.messages, "a")
    assert body is not None
    worker = app.worker()
    assert worker.run_once() and worker.run_once()  # A, then B (which sends C)
    assert app.handle("b").forget()  # B ran; nothing of it is left
    _again(app, body, 2)
    assert app.handle("b").status() == "unknown"
    assert fake_redis.hget(KEYS.once("c"), "state") == b"sent"
    assert worker.run_once()
    assert app.handle("c").get(timeout=1) == 7
