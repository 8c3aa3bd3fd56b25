"""assert_type checks for workflows: signatures, chain, group, chord (mypy checks this
file; pytest ignores it).

The types are the ones minitask/canvas/workflows.py declares: a signature's ``delay()``
gives a ``TaskHandle[Any]`` (a step's result type is not tracked), a group's a ``GroupHandle``,
and a chain's or a chord's ``Any`` (the handle of its last step: a ``TaskHandle`` or,
when it ends with a group, a ``GroupHandle``). An ``# type: ignore[...]`` marks a line
mypy must refuse: with ``warn_unused_ignores`` (strict) an unneeded ignore fails.
"""
from __future__ import annotations

from typing import Any, Dict, List

from typing_extensions import assert_type

from minitask import GroupHandle, Minitask, Signature, TaskHandle, chain, chord, group

app = Minitask("typing")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def total(numbers: List[int]) -> int:
    return sum(numbers)


@app.task
def alert(task_id: str) -> None:
    return None


def signature_types() -> None:
    assert_type(add.s(1, 2), Signature)
    assert_type(add.s(1), Signature)  # partial: the rest comes from the step before
    assert_type(add.si(1, 2), Signature)
    assert_type(add.s(1).set(queue="fast", priority=9), Signature)
    assert_type(add.s(1).clone(), Signature)
    assert_type(add.s(1, 2).on_error(alert.s()), Signature)
    assert_type(add.s(1, 2).delay(), TaskHandle[Any])
    assert_type(add.s(1).delay(2), TaskHandle[Any])
    assert_type(add.s(1, 2).apply_async(queue="fast"), Any)
    assert_type(add.s(1, 2).delay().get(), Any)


def chain_types() -> None:
    steps = chain(add.s(1, 2), add.s(3), total.s())
    assert_type(steps, chain)
    assert_type(add.s(1, 2) | add.s(3), chain)
    assert_type(add.s(1, 2) | add.s(3) | add.s(4), chain)
    assert_type(steps.on_error(alert.s()), chain)
    assert_type(steps.delay(), Any)
    assert_type(steps.apply_async((1,), {"y": 2}), Any)


def group_types() -> None:
    members = group(add.s(1, 2), add.s(3, 4))
    assert_type(members, group)
    assert_type(group([add.s(i, i) for i in range(3)]), group)
    assert_type(members.delay(), GroupHandle)
    assert_type(members.delay().get(), List[Any])
    assert_type(members.delay().get(timeout=2.0), List[Any])
    assert_type(members.delay().status(), Dict[str, int])
    assert_type(members.on_error(alert.s()), group)
    assert_type(members | total.s(), chain)


def chord_types() -> None:
    joined = chord([add.s(1, 2), add.s(3, 4)], total.s())
    assert_type(joined, chord)
    assert_type(chord(group(add.s(1, 2)), total.s()), chord)
    assert_type(joined.delay(), Any)
    assert_type(joined.on_error(alert.s()), chord)
    assert_type(joined | alert.s(), chain)


def refused() -> None:
    handle: TaskHandle[Any] = group(add.s(1, 2)).delay()  # type: ignore[assignment]
    one: GroupHandle = add.s(1, 2).delay()  # type: ignore[assignment]
    sig: Signature = chain(add.s(1, 2))  # type: ignore[assignment]
    assert handle and one and sig
    add.s(1, 2) | add  # type: ignore[operator]
    add.s(1, 2).on_error(alert)  # type: ignore[arg-type]
    chord([add.s(1, 2)], total)  # type: ignore[arg-type]
    group(add.s(1, 2)).delay().get(timeout="soon")  # type: ignore[arg-type]
