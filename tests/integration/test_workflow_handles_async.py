"""The handles a signature or a workflow returns have their async twins, as a task's
``delay()`` handles do: ``aget``, ``astatus``, ``acancel`` and the other ``a*`` calls
once said the handle was "made without an app". On a real server."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Tuple

import pytest

from minitask import Minitask, TaskHandle, chain, chord, group
from tests.support.draining import drain
from tests.unit.test_rebuilt_workflow_handles import _tasks  # add(a, b), total(values)

pytestmark = [pytest.mark.integration, pytest.mark.app("wfasync", on="server")]

DEADLINE = 60.0


def _member(add: Any, index: int) -> TaskHandle[Any]:
    """The handle of member ``index`` of a sent group (of two tasks, not groups)."""
    handle = group(add.s(3, 3), add.s(4, 4)).delay().handles[index]
    assert isinstance(handle, TaskHandle)
    return handle


#: How a handle is made -> (the handle, the value its task returns).
MAKERS: Dict[str, Callable[[Any, Any], Tuple[TaskHandle[Any], int]]] = {
    "signature delay": lambda add, total: (add.s(1, 2).delay(), 3),
    "signature apply_async": lambda add, total: (add.s(1).apply_async((5,)), 6),
    "signature apply_async with options": lambda add, total: (
        add.s(2, 2).apply_async(queue="other"), 4),
    "chain delay": lambda add, total: (chain(add.s(1, 1), add.s(10)).delay(), 12),
    "chord delay": lambda add, total: (
        chord(group(add.s(1, 1), add.s(2, 2)), total.s()).delay(), 6),
    "group member": lambda add, total: (_member(add, 1), 8),
}


@pytest.mark.parametrize("how", sorted(MAKERS))
def test_every_async_twin_answers_on_a_workflows_handle(app: Minitask, how: str) -> None:
    add, total = _tasks(app)
    handle, value = MAKERS[how](add, total)
    drain(app.worker(queues=["default", "other"], burst=True))

    async def follow() -> List[Any]:
        try:
            return [await handle.aget(timeout=DEADLINE), await handle.astatus(),
                    await handle.aready(), await handle.asuccessful(),
                    await handle.afailed(), await handle.aprogress(),
                    await handle.acancel(), await handle.aforget(),
                    await handle.astatus()]
        finally:
            await app.aclose()

    seen = asyncio.run(asyncio.wait_for(follow(), DEADLINE))
    assert seen == [value, "succeeded", True, True, False, None, False, True, "unknown"]


def test_acancel_withdraws_a_signatures_task_and_its_group_member(app: Minitask) -> None:
    add, _ = _tasks(app)
    alone = add.s(1, 2).delay()
    member = _member(add, 0)

    async def cancel() -> List[Any]:
        try:
            return [await alone.acancel(), await member.acancel(),
                    await alone.astatus(), await member.astatus()]
        finally:
            await app.aclose()

    assert asyncio.run(asyncio.wait_for(cancel(), DEADLINE)) == [
        True, True, "cancelled", "cancelled"]
    assert (alone.status(), member.status()) == ("cancelled", "cancelled")
