"""assert_type checks for sending by name (mypy checks this file; pytest ignores it).

A producer that sends by name has no function to type the result by: the handle's
result is ``Any`` unless the caller states it. Each ``# type: ignore[...]`` marks a
call mypy must refuse (``warn_unused_ignores`` makes an unneeded one an error).
"""
from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

from minitask import GroupHandle, Minitask, Signature, TaskHandle, chain, chord, group

producer = Minitask("typing", routes={"billing.*": {"queue": "billing", "priority": 7}})


def send_types() -> None:
    handle = producer.send("shop.add", (2, 3))
    assert_type(handle, TaskHandle[Any])
    assert_type(handle.get(timeout=5), Any)
    stated: TaskHandle[int] = producer.send("shop.add", [2, 3], {"z": 1}, priority=9,
                                            queue="urgent", delay=1.5, task_id="t-1")
    assert_type(stated.get(timeout=5), int)
    total: int = producer.send("shop.add", (2, 3)).get(timeout=5)
    assert total
    producer.send("shop.add", (2, 3), retries=3)  # type: ignore[call-arg]
    producer.send("shop.add", (2, 3), priority="high")  # type: ignore[arg-type]
    producer.send(b"shop.add")  # type: ignore[arg-type]


async def awaited_types() -> None:
    handle = await producer.asend("shop.add", (2, 3), priority=9)
    assert_type(handle, TaskHandle[Any])
    assert_type(await handle.aget(timeout=5), Any)
    stated: TaskHandle[str] = await producer.asend("shop.greet", ["Ada"])
    assert_type(await stated.aget(timeout=5), str)
    await producer.asend("shop.add", (2, 3), retries=3)  # type: ignore[call-arg]


def signature_types() -> None:
    sig = producer.signature("shop.add", 1, y=2)
    assert_type(sig, Signature)
    assert_type(sig.set(queue="q", immutable=True), Signature)
    assert_type(chain(sig, producer.signature("shop.add", 3)).delay(), Any)
    assert_type(group(sig, sig).delay(), GroupHandle)
    assert_type(chord([sig], producer.signature("shop.total")).delay(), Any)
    producer.signature(5)  # type: ignore[arg-type]
