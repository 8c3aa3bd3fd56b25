"""assert_type checks for plain (sync) tasks (mypy checks this file; pytest ignores it).

An ``# type: ignore[...]`` here marks a call mypy must refuse: with
``warn_unused_ignores`` (strict), an ignore that is not needed is an error, so each
one proves that the call it sits on is a type error.
"""
from __future__ import annotations

import datetime as dt
from typing import Dict, List, Optional

from typing_extensions import assert_type

from minitask import Minitask, Task, TaskHandle

app = Minitask("typing")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task(queue="mail", priority=7)
def send(to: str, *, cc: Optional[List[str]] = None) -> Dict[str, bool]:
    return {to: True}


@app.task
def ping() -> None:
    return None


def task_types() -> None:
    plain: Task[..., int] = add
    queued: Task[..., Dict[str, bool]] = send
    not_str: Task[..., str] = add  # type: ignore[assignment]
    assert plain and queued and not_str
    assert_type(add(1, 2), int)  # calling the task runs the function here


def handle_types() -> None:
    when = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    assert_type(add.delay(1, 2), TaskHandle[int])
    assert_type(add.apply_in(5.0, 1, 2), TaskHandle[int])
    assert_type(add.apply_at(when, 1, 2), TaskHandle[int])
    assert_type(add.apply_at(1_900_000_000.0, x=1, y=2), TaskHandle[int])
    assert_type(add.apply_async((1, 2)), TaskHandle[int])
    assert_type(add.apply_async((1,), {"y": 2}, queue="fast", priority=9, delay=1.5,
                                task_id="t-1", limit_key="tenant", debounce=2.0,
                                expires=when, durability="replicated"), TaskHandle[int])
    assert_type(add.delay_many([(1, 2), [3, 4]]), List[TaskHandle[int]])
    assert_type(send.delay("a@b", cc=["c@d"]), TaskHandle[Dict[str, bool]])
    assert_type(ping.delay(), TaskHandle[None])


def result_types() -> None:
    handle = add.delay(1, 2)
    assert_type(handle.get(), int)
    assert_type(handle.get(timeout=1.5), int)
    assert_type(send.delay("a@b").get(), Dict[str, bool])
    assert_type(ping.delay().get(), None)
    assert_type(handle.status(), str)
    assert_type(handle.cancel(), bool)
    assert_type(handle.id, str)


def refused_calls() -> None:
    add.delay(1, "2")  # type: ignore[arg-type]
    add.delay(1)  # type: ignore[call-arg]
    add.delay(1, 2, 3)  # type: ignore[call-arg]
    add.delay(1, z=2)  # type: ignore[call-arg]
    add.apply_in(5.0, "1", 2)  # type: ignore[arg-type]
    add.apply_in("soon", 1, 2)  # type: ignore[arg-type]
    add.apply_at("tomorrow", 1, 2)  # type: ignore[arg-type]
    add.apply_at(dt.datetime(2030, 1, 1), y="2", x=1)  # type: ignore[arg-type]
    send.delay("a@b", ["c@d"])  # type: ignore[call-arg]
    send.delay("a@b", cc="c@d")  # type: ignore[arg-type]
    ping.delay(1)  # type: ignore[call-arg]
    add(1, "2")  # type: ignore[arg-type]


def refused_options() -> None:
    add.apply_async((1, 2), queue=1)  # type: ignore[arg-type]
    add.apply_async((1, 2), priority="high")  # type: ignore[arg-type]
    add.apply_async((1, 2), delay="1s")  # type: ignore[arg-type]
    add.apply_async((1, 2), eta="tomorrow")  # type: ignore[arg-type]
    add.apply_async((1, 2), expires="soon")  # type: ignore[arg-type]
    add.apply_async((1, 2), task_id=7)  # type: ignore[arg-type]
    add.apply_async((1, 2), durability=2)  # type: ignore[arg-type]
    add.apply_async((1, 2), colour="red")  # type: ignore[call-arg]
    add.apply_async((1, 2), [("y", 2)])  # type: ignore[arg-type]
    add.delay_many([1, 2])  # type: ignore[list-item]


def wrong_results() -> None:
    number: str = add.delay(1, 2).get()  # type: ignore[assignment]
    handle: TaskHandle[str] = add.delay(1, 2)  # type: ignore[assignment]
    handles: List[TaskHandle[str]] = add.delay_many([(1, 2)])  # type: ignore[assignment]
    assert number and handle and handles
