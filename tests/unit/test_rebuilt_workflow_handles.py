"""A workflow's handle rebuilt from its id in another process: a chain's last step
waits while it is not sent yet; a group's handle comes back from its id."""
from __future__ import annotations

import asyncio
import re
from typing import Any, List, Tuple

import fakeredis
import pytest

from minitask import (ConfigurationError, DecodeError, GroupHandle, Minitask, ResultTimeout,
                      TaskFailed, chain, chord, group)
from tests.support.clock import ManualClock
from tests.support.draining import drain


def _apps(clock: ManualClock) -> Tuple[Minitask, Minitask]:
    """The producer's app and another program's, on one server (two clients each)."""
    server = fakeredis.FakeServer()
    return tuple(  # type: ignore[return-value]
        Minitask("test", broker=fakeredis.FakeRedis(server=server),
                 async_broker=fakeredis.FakeAsyncRedis(server=server), clock=clock)
        for _ in range(2))


def _tasks(app: Minitask) -> Any:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def total(values: List[int]) -> int:
        return sum(values)

    return add, total


def test_a_chains_last_step_rebuilt_elsewhere_waits_until_it_is_sent(
        clock: ManualClock) -> None:
    producer, other = _apps(clock)
    add, _ = _tasks(producer)
    _tasks(other)
    last = chain(add.s(1, 1), add.s(10), add.s(100)).delay()
    rebuilt = other.handle(last.id)
    assert rebuilt.status() == "unknown"  # not sent yet
    with pytest.raises(ResultTimeout, match="did not finish within 0.01 s"):
        rebuilt.get(timeout=0.01)  # waited, rather than "unknown" at once
    drain(producer.worker(burst=True))
    assert rebuilt.get(timeout=1) == 112
    assert other.handle(last.id).get(timeout=1) == 112


def test_the_async_twin_waits_for_a_chains_last_step_too(clock: ManualClock) -> None:
    producer, other = _apps(clock)
    add, _ = _tasks(producer)
    _tasks(other)
    last = chain(add.s(1, 1), add.s(10)).delay()

    async def early() -> None:
        await other.handle(last.id).aget(timeout=0.01)

    with pytest.raises(ResultTimeout, match="did not finish within 0.01 s"):
        asyncio.run(early())
    drain(producer.worker(burst=True))

    async def late() -> Any:
        return await other.handle(last.id).aget(timeout=1)

    assert asyncio.run(late()) == 12


@pytest.mark.parametrize("how", ["get", "aget"])
def test_an_id_nobody_sent_is_unknown_at_once_in_both_twins(clock: ManualClock,
                                                            how: str) -> None:
    producer, _ = _apps(clock)
    add, _ = _tasks(producer)
    add.delay(1, 2)  # the queue exists; the id does not
    handle = producer.handle("nobody")

    async def aget() -> Any:
        return await handle.aget(timeout=30)

    with pytest.raises(ResultTimeout, match="is unknown in any queue"):
        handle.get(timeout=30) if how == "get" else asyncio.run(aget())


def test_the_handle_record_is_written_with_the_first_message_and_expires_with_results(
        clock: ManualClock) -> None:
    producer, _ = _apps(clock)
    add, _ = _tasks(producer)
    last = chain(add.s(1, 1).set(queue="first"), add.s(10).set(queue="second")).delay()
    client = producer.broker.client
    key = producer.broker.results.keys("first").handle(last.id)
    assert 0 < client.pttl(key) <= 86_400_000
    assert client.keys("*handle:*") == [key.encode()]


def test_a_workflow_refused_before_sending_leaves_no_handle_record(
        clock: ManualClock) -> None:
    producer, _ = _apps(clock)
    add, _ = _tasks(producer)
    with pytest.raises(TypeError):
        chain(add.s(1, 1), add.s(object())).delay()
    assert producer.broker.client.keys("*") == []


def test_a_group_handle_rebuilt_from_its_id_reads_its_members(clock: ManualClock) -> None:
    producer, other = _apps(clock)
    add, _ = _tasks(producer)
    _tasks(other)
    sent = group(add.s(1, 1), chain(add.s(2, 2), add.s(3)),
                 group(add.s(5, 5), add.s(6, 6).set(queue="other"))).delay()
    rebuilt = other.group_handle(sent.id)
    assert isinstance(rebuilt, GroupHandle) and rebuilt.id == sent.id
    assert [type(h).__name__ for h in rebuilt.handles] == [
        type(h).__name__ for h in sent.handles]
    assert [h.id for h in rebuilt.handles[:2]] == [h.id for h in sent.handles[:2]]
    assert rebuilt.status() == sent.status() == {"queued": 2, "running": 1}
    drain(producer.worker(["default", "other"], burst=True))
    assert rebuilt.get(timeout=1) == [2, 7, [10, 12]]
    assert rebuilt.status() == {"succeeded": 3}


def test_a_chain_ending_in_a_group_and_a_chords_body_are_rebuilt(clock: ManualClock) -> None:
    producer, other = _apps(clock)
    add, total = _tasks(producer)
    _tasks(other)
    fanned = chain(add.s(1, 1), group(add.s(10), add.s(20))).delay()
    body = chord([add.s(1, 2), add.s(3, 4)], total.s()).delay()
    drain(producer.worker(burst=True))
    assert other.group_handle(fanned.id).get(timeout=1) == [12, 22]
    assert other.handle(body.id).get(timeout=1) == 10


def test_an_unknown_group_id_says_so(clock: ManualClock) -> None:
    producer, _ = _apps(clock)
    add, _ = _tasks(producer)
    last = chain(add.s(1, 1), add.s(10)).delay()
    with pytest.raises(ConfigurationError, match="group 'nope' is unknown on"):
        producer.group_handle("nope")
    with pytest.raises(ConfigurationError, match="a task's, not a group's"):
        producer.group_handle(last.id)
    with pytest.raises(ConfigurationError, match="group_id"):
        producer.group_handle(7)  # type: ignore[arg-type]


def test_a_rebuilt_last_step_of_a_chain_that_died_earlier_names_the_step_that_died(
        clock: ManualClock) -> None:
    producer, other = _apps(clock)
    add, _ = _tasks(producer)

    @producer.task(name="breaks", retries=0)
    def breaks() -> int:
        raise RuntimeError("no stock")

    last = chain(breaks.si().set(task_id="first"), add.s(1)).delay()
    drain(producer.worker(burst=True))
    rebuilt = other.handle(last.id)
    with pytest.raises(TaskFailed, match="no stock") as failed:
        rebuilt.get(timeout=1)
    assert failed.value.task_id == "first" and failed.value.exc_type == "RuntimeError"
    assert rebuilt.failed() and rebuilt.status() == "cancelled"


@pytest.mark.parametrize("planted", ["a list", "other bytes"])
def test_a_handle_record_minitask_did_not_write_is_named_alike_in_both_twins(
        clock: ManualClock, planted: str) -> None:
    # not "unknown" (never sent), which is not what Redis holds (probe 13 M4)
    producer, _ = _apps(clock)
    add, _ = _tasks(producer)
    add.delay(1, 2)  # the queue exists
    key = producer.broker.results.keys("default").handle("planted")
    client = producer.broker.client
    if planted == "a list":
        client.rpush(key, b"x")
    else:
        client.set(key, b"\xc1 not msgpack")
    said = f"the handle record {key} holds"
    handle = producer.handle("planted")
    with pytest.raises(DecodeError, match=re.escape(said)):
        handle.get(timeout=30)

    async def aget() -> Any:
        try:
            return await producer.handle("planted").aget(timeout=30)
        finally:
            await producer.aclose()

    with pytest.raises(DecodeError, match=re.escape(said)):
        asyncio.run(aget())
    with pytest.raises(ConfigurationError, match=re.escape(f"cannot be rebuilt: {said}")):
        producer.group_handle("planted")


def test_a_forgotten_chain_answers_unknown_at_once_in_both_twins(
        clock: ManualClock) -> None:
    # Before: forget() left the chain's handle record, so get() (and app.handle(id)'s)
    # waited for the forgotten step as if it were not sent yet: for ever without a
    # timeout.
    producer, other = _apps(clock)
    add, _ = _tasks(producer)
    _tasks(other)
    first = chain(add.s(1, 1), add.s(10)).delay()
    second = chain(add.s(2, 2), add.s(20)).delay()
    drain(producer.worker(burst=True))
    assert first.get(timeout=1) == 12 and first.forget() is True
    for handle in (first, other.handle(first.id)):
        with pytest.raises(ResultTimeout, match="unknown in queue|never enqueued"):
            handle.get(timeout=30)  # at once: it would wait out the 30 s before

    async def forget_async() -> None:
        try:
            assert await other.handle(second.id).aforget() is True
            with pytest.raises(ResultTimeout, match="unknown in queue|never enqueued"):
                await other.handle(second.id).aget(timeout=30)
        finally:
            await other.aclose()

    asyncio.run(forget_async())
