"""assert_type checks for handle questions, rebuilt workflow handles and registered
types (mypy checks this file; pytest ignores it). An ``# type: ignore[...]`` marks a
call mypy must refuse (``warn_unused_ignores`` makes an unneeded one an error)."""
from __future__ import annotations

import enum
from typing import Any

from typing_extensions import assert_type

from minitask import GroupHandle, Minitask, TaskHandle

app = Minitask("typing")


class Plan(enum.Enum):
    FREE = "free"


@app.task
def add(x: int, y: int) -> int:
    return x + y


def handle_questions() -> None:
    handle = add.delay(1, 2)
    assert_type(handle.ready(), bool)
    assert_type(handle.successful(), bool)
    assert_type(handle.failed(), bool)
    assert_type(handle.forget(), bool)
    assert_type(app.handle("id"), TaskHandle[Any])
    assert_type(app.group_handle("id"), GroupHandle)


async def async_questions() -> None:
    handle = add.delay(1, 2)
    assert_type(await handle.aready(), bool)
    assert_type(await handle.asuccessful(), bool)
    assert_type(await handle.afailed(), bool)
    assert_type(await handle.aforget(), bool)


def registration() -> None:
    app.register_type(Plan, 40, lambda plan: plan.value.encode(),
                      lambda data: Plan(data.decode()))
    app.register_type(Plan, "40", bytes, Plan)  # type: ignore[arg-type]
