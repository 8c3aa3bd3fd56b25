"""``cancel()`` of a workflow step not sent yet, driven in-process on fakeredis (a real
worker and server: tests/integration/test_cancel_unsent_workflow_steps.py): the step is
never sent, reads ``cancelled``, and what follows it ends cancelled naming it; an id no
workflow promised is left alone, nothing written."""
from __future__ import annotations

import asyncio
from typing import Any, List, Tuple

import pytest
import redis

from minitask import Minitask, TaskFailed, chain, chord, group
from minitask.broker.keys import queue_keys
from tests.support.draining import drain

KEYS = queue_keys("test", "default")


def _adder(app: Minitask, ran: List[Tuple[Any, ...]]) -> Any:
    @app.task
    def add(x: Any, y: int) -> Any:
        ran.append((x, y))
        return x + y if isinstance(x, int) else sum(x) + y

    return add


def _raises_cancelled(handle: Any, task_id: str) -> None:
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=0)
    assert (ended.value.task_id, ended.value.exc_type) == (task_id, "Cancelled")
    assert handle.status() == "cancelled"


def test_steps_cancelled_before_they_are_sent_never_run_and_what_follows_ends(
        app: Minitask) -> None:
    ran: List[Tuple[Any, ...]] = []
    add = _adder(app, ran)
    middle = chain(add.si(1, 1), add.s(2).set(task_id="mid"), add.s(3)).delay()
    last = chain(add.si(5, 5), add.s(6)).delay()
    body = chord([add.si(7, 7), add.si(8, 8)], add.s(9)).delay()
    assert app.handle("mid").cancel() is True       # its reserved marker
    assert app.handle(last.id).cancel() is True     # the workflow's handle record
    assert asyncio.run(body.acancel()) is True      # the handle delay() returned
    assert app.handle("mid").status() == "cancelled"
    assert app.handle("mid").cancel() is False      # cancelled already
    drain(app.worker(burst=True))
    assert sorted(ran) == [(1, 1), (5, 5), (7, 7), (8, 8)]
    _raises_cancelled(middle, "mid")  # the last step names the one cancelled
    _raises_cancelled(app.handle("mid"), "mid")
    _raises_cancelled(last, last.id)
    _raises_cancelled(body, body.id)


def test_an_id_no_workflow_promised_is_not_cancelled_nor_marked(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    ran: List[Tuple[Any, ...]] = []
    add = _adder(app, ran)
    assert app.handle("nobody").cancel() is False
    assert fake_redis.exists(KEYS.once("nobody"), KEYS.result("nobody")) == 0
    done = chain(add.si(1, 1), add.s(2)).delay()
    drain(app.worker(burst=True))
    assert done.cancel() is False and app.handle(done.id).cancel() is False
    assert done.get(timeout=0) == 4 and done.status() == "succeeded"


def test_a_marker_minitask_did_not_write_is_left_as_it_is(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    ran: List[Tuple[Any, ...]] = []
    add = _adder(app, ran)
    handle = chain(add.si(1, 1), add.s(2)).delay()
    fake_redis.set(KEYS.once(handle.id), b"planted")
    assert handle.cancel() is False
    assert fake_redis.get(KEYS.once(handle.id)) == b"planted"
    assert fake_redis.exists(KEYS.result(handle.id)) == 0


def test_a_group_member_s_later_step_cancelled_ends_its_group_s_waits(app: Minitask) -> None:
    """A member's later step cancelled before it is sent: a group's ``get()`` raises it
    (its handle from ``GroupHandle.handles``), and a chord's header fails, its body
    ending cancelled, naming it."""
    ran: List[Tuple[Any, ...]] = []
    add = _adder(app, ran)
    whole = group(chain(add.si(1, 1), add.s(2)), add.si(3, 3)).delay()
    joined = chord([chain(add.si(4, 4), add.s(5).set(task_id="h-2")), add.si(6, 6)],
                   add.s(7)).delay()
    step = whole.handles[0]
    assert step.cancel() is True
    assert app.handle("h-2").cancel() is True
    drain(app.worker(burst=True))
    assert sorted(ran) == [(1, 1), (3, 3), (4, 4), (6, 6)]
    _raises_cancelled(step, step.id)
    with pytest.raises(TaskFailed) as ended:
        whole.get(timeout=0)
    assert (ended.value.task_id, ended.value.exc_type) == (step.id, "Cancelled")
    _raises_cancelled(joined, "h-2")
