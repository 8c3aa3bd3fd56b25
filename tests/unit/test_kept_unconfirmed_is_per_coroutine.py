"""keep_unconfirmed() holds for the code it wraps alone: a coroutine that opened it
and awaits must not swallow another coroutine's unconfirmed write."""
from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

from minitask.broker import durability
from minitask.errors import DurabilityError


def _unconfirmed() -> None:
    """A WAIT that saw no replica confirm the write."""
    durability.Durability(mode="replicated").check(0, "test", "test")


def test_a_block_open_across_an_await_keeps_only_its_own_coroutines_errors() -> None:
    async def keeping(opened: asyncio.Event, done: asyncio.Event) -> List[DurabilityError]:
        with durability.keep_unconfirmed() as kept:
            opened.set()
            await done.wait()
            return kept

    async def other(opened: asyncio.Event, done: asyncio.Event) -> None:
        await opened.wait()
        try:
            with pytest.raises(DurabilityError):
                _unconfirmed()
        finally:
            done.set()

    async def both() -> List[DurabilityError]:
        opened, done = asyncio.Event(), asyncio.Event()
        kept, _ = await asyncio.gather(keeping(opened, done), other(opened, done))
        return kept

    assert asyncio.run(both()) == []


def test_another_thread_still_raises_and_nesting_hands_errors_out() -> None:
    raised: List[BaseException] = []

    def elsewhere() -> None:
        try:
            _unconfirmed()
        except DurabilityError as exc:
            raised.append(exc)

    with durability.keep_unconfirmed() as outer:
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join(10)
        with durability.keep_unconfirmed() as inner:
            _unconfirmed()
        assert len(inner) == 1
    assert len(raised) == 1 and len(outer) == 1
    with pytest.raises(DurabilityError):
        _unconfirmed()
