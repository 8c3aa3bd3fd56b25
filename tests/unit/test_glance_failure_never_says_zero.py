"""A failed shared glance at queued result waits (``get()``'s ``_Turns``, ``aget()``'s
``AsyncResultWaits``) says how many waits were queued as it began and how many keys
it read: counted after it, the waits had all left meanwhile (the glancer handed a
connection, their deadlines passed), and the warning blamed "0 queued get() waits"."""
from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any, List

import pytest

from minitask.broker.pools import _Turns, glance_failed
from minitask.stores.aio_clients import AsyncResultWaits


class _Pipe:
    """A pipeline whose execute runs ``meanwhile`` (sync or async) and then fails."""

    def __init__(self, meanwhile: Any) -> None:
        self.meanwhile = meanwhile

    def __enter__(self) -> "_Pipe":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    async def __aenter__(self) -> "_Pipe":
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        return False

    def lindex(self, key: str, index: int) -> None:
        pass

    def execute(self, raise_on_error: bool = True) -> Any:
        outcome = self.meanwhile()
        if asyncio.iscoroutine(outcome):
            return self._after(outcome)
        raise ConnectionError("Connection reset by peer")

    async def _after(self, outcome: Any) -> None:
        await outcome
        raise ConnectionError("Connection reset by peer")


class _Client:
    def __init__(self, meanwhile: Any) -> None:
        self.meanwhile = meanwhile

    def pipeline(self, transaction: bool = False) -> _Pipe:
        return _Pipe(self.meanwhile)

    async def blmove(self, *args: Any) -> None:
        await asyncio.sleep(30)

    async def lindex(self, key: str, index: int) -> None:
        return None


def _counts(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [record.getMessage() for record in caplog.records
            if "shared look" in record.getMessage()]


def test_get_glance_counts_the_waits_queued_as_it_began(
        caplog: pytest.LogCaptureFixture) -> None:
    turns = _Turns(1)
    assert turns.acquire()  # the one waiting connection is taken: waits queue
    seen = turns.join("result:a")
    assert seen is not None
    # while the glance runs, the connection comes back, to the glancer itself
    with caplog.at_level(logging.WARNING, logger="minitask.broker.pools"):
        assert turns.wait(seen, time.monotonic() + 5.0, _Client(turns.release)) is True
    said = _counts(caplog)
    assert len(said) == 1, said
    assert "it read 1 key in one pipeline, for the 1 wait queued as it began" in said[0], said[0]
    assert not re.search(r"\b0 queued", said[0]), said[0]


def test_aget_glance_counts_the_waits_queued_as_it_began(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Any:
        waits = AsyncResultWaits(_Client(lambda: asyncio.sleep(0.3)))  # type: ignore[arg-type]
        waits._gate = asyncio.Semaphore(1)
        blocking = asyncio.ensure_future(waits.read("result:a", 5.0))  # holds the connection
        await asyncio.sleep(0.01)
        # two waits queued; their deadlines pass while the glance fails
        found = await asyncio.gather(waits.read("result:b", 0.1), waits.read("result:c", 0.1))
        await asyncio.sleep(0.4)
        blocking.cancel()
        return found

    with caplog.at_level(logging.WARNING, logger="minitask.stores.aio_clients"):
        assert asyncio.run(asyncio.wait_for(scenario(), 30)) == [None, None]
    said = _counts(caplog)
    assert len(said) == 1, said
    assert "it read 2 keys in one pipeline, for the 2 waits queued as it began" in said[0], said[0]


def test_no_count_is_said_when_none_was_counted() -> None:
    said = glance_failed("get()", 0, 0, ConnectionError("reset"))
    assert not re.search(r"\b0\b", said), said
