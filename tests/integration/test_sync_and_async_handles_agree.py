"""A handle's async twins read and write exactly what its sync ones do, whatever other
tasks the process looked at first: ``astatus`` agrees with ``status``, and ``acancel``
ends the task it is called on, never an earlier one of the same queue. On a real
server, where the async client sends script calls packed ahead of time."""
from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

from minitask import Minitask
from tests.support.draining import drain

pytestmark = [pytest.mark.integration, pytest.mark.app("twins", on="server")]


def test_status_and_cancel_twins_agree_on_every_handle(app: Minitask) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    done = add.delay(1, 1)
    drain(app.worker(burst=True))
    later = [add.apply_in(3600, n, n) for n in range(3)]

    async def follow() -> List[Any]:
        try:
            seen = [await done.astatus()]               # a finished task read first
            seen += [await h.astatus() for h in later]   # then others of its queue
            assert await later[0].acancel() is True
            assert await later[1].acancel() is True
            seen += [await h.astatus() for h in (done, *later)]
            return seen
        finally:
            await app.aclose()

    seen = asyncio.run(follow())
    assert seen == ["succeeded", "scheduled", "scheduled", "scheduled",
                    "succeeded", "cancelled", "cancelled", "scheduled"]
    assert [h.status() for h in (done, *later)] == seen[4:]
    assert done.get(timeout=0) == 2
