"""Sending a task by its name: a producer that registers no task sends calls, chains,
groups and chords that the workers of another program run; the message is the one
``apply_async`` would write; and the worker, the only one able to check the arguments,
dead-letters a call that does not bind with ArgumentError, never retried."""
from __future__ import annotations

import asyncio
from typing import Any, Iterator

import fakeredis
import pytest
import redis

from minitask import (ArgumentError, BatchNotSent, ConfigurationError, EncodeError, Minitask,
                      Signature, TaskFailed, chain, chord, group)
from minitask.broker.keys import queue_keys
from minitask.wire.message import Message
from minitask.wire.serializer import decode_message
from tests.support.clock import ManualClock
from tests.support.draining import drain


@pytest.fixture
def workers(fake_redis: "redis.Redis[bytes]", clock: ManualClock) -> Iterator[Minitask]:
    """The workers' app: it registers the tasks, and retries any error twice."""
    app = Minitask("shop", broker=fake_redis, clock=clock,
                   routes={"billing.*": {"queue": "billing", "priority": 7}})

    @app.task(name="shop.add", retries=2, retry_backoff=0)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="shop.total", retries=2, retry_backoff=0)
    def total(values: Any) -> int:
        return sum(values)

    @app.task(name="billing.charge", retries=2, retry_backoff=0)
    def charge(cents: int, *, currency: str = "EUR") -> str:
        return f"{cents} {currency}"

    yield app
    app.close()


@pytest.fixture
def producer(fake_redis: "redis.Redis[bytes]", clock: ManualClock) -> Iterator[Minitask]:
    """A producer that knows the names only; its routes are the workers'."""
    app = Minitask("shop", broker=fake_redis, clock=clock,
                   routes={"billing.*": {"queue": "billing", "priority": 7}})
    yield app
    app.close()


def stored(client: "redis.Redis[bytes]", queue: str, task_id: str) -> Message:
    body = client.hget(queue_keys("shop", queue).messages, task_id)
    assert body is not None, f"no message {task_id!r} in queue {queue!r}"
    return decode_message(body)


def run(app: Minitask) -> int:
    return drain(app.worker(queues=app.worker_queues(), burst=True))


def test_a_producer_with_no_task_sends_by_name_and_gets_the_result(
        producer: Minitask, workers: Minitask) -> None:
    assert producer.tasks == {}
    handle = producer.send("shop.add", (2, 3))
    assert handle.status() == "queued"
    assert run(workers) == 1
    assert handle.get(timeout=0) == 5


def test_the_message_is_the_one_apply_async_writes(
        producer: Minitask, workers: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    by_name = producer.send("shop.add", [1], {"y": 2}, task_id="by-name", priority=8,
                            queue="special")
    decorated = workers.tasks["shop.add"].apply_async([1], {"y": 2}, task_id="decorated",
                                                      priority=8, queue="special")
    assert by_name.id == "by-name" and decorated.id == "decorated"
    sent = stored(fake_redis, "special", "by-name")
    reference = stored(fake_redis, "special", "decorated")
    assert (sent.task, sent.args, sent.kwargs, sent.queue, sent.priority, sent.attempt) == (
        "shop.add", [1], {"y": 2}, "special", 8, 1)
    assert sent.attempt == reference.attempt and sent.flow == reference.flow is None


def test_the_queue_comes_from_the_call_then_the_routes_then_the_default(
        producer: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    routed = producer.send("billing.charge", (100,))
    assert stored(fake_redis, "billing", routed.id).priority == 7
    overridden = producer.send("billing.charge", (100,), queue="urgent", priority=9)
    assert stored(fake_redis, "urgent", overridden.id).priority == 9
    only_queue = producer.send("billing.charge", (100,), queue="urgent")
    assert stored(fake_redis, "urgent", only_queue.id).priority == 7  # the route's, still
    plain = producer.send("reports.daily")
    assert stored(fake_redis, "default", plain.id).priority == 5


def test_a_registered_name_is_sent_as_its_task_sends_it(
        workers: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    handle = workers.send("billing.charge", (5,), {"currency": "USD"})
    assert stored(fake_redis, "billing", handle.id).task == "billing.charge"
    with pytest.raises(ArgumentError, match="'billing.charge'"):
        workers.send("billing.charge", (5, 6))  # checked here: this app has the function
    run(workers)
    assert handle.get(timeout=0) == "5 USD"


@pytest.mark.parametrize("name, problem", [
    ("", "must be a non-empty str"), (None, "must be a non-empty str"),
    (42, "must be a non-empty str"), ("shop.\nadd", "control or format character"),
    (b"shop.add", "must be a non-empty str"),
])
def test_a_bad_name_is_refused_before_anything_is_sent(
        producer: Minitask, fake_redis: "redis.Redis[bytes]", name: Any, problem: str) -> None:
    before = sorted(fake_redis.keys("*"))
    for build in (lambda: producer.send(name), lambda: producer.signature(name)):
        with pytest.raises(ConfigurationError, match=problem) as refused:
            build()
        assert "app 'shop'" in str(refused.value) and repr(name) in str(refused.value)
    assert sorted(fake_redis.keys("*")) == before


def test_options_and_arguments_are_checked_as_apply_async_checks_them(
        producer: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    before = sorted(fake_redis.keys("*"))
    with pytest.raises(ConfigurationError, match="unknown option.*retries.*for send"):
        producer.send("shop.add", (1, 2), retries=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="priority must be an int from 0 to 9"):
        producer.send("shop.add", (1, 2), priority=10)
    with pytest.raises(ArgumentError, match="'shop.add': send args must be a tuple or list"):
        producer.send("shop.add", 5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="send kwargs must be a dict"):
        producer.send("shop.add", (), [1])  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="'shop.add'.*args\\[0\\]"):
        producer.send("shop.add", (object(),))
    assert sorted(fake_redis.keys("*")) == before


def test_a_call_that_does_not_bind_is_dead_lettered_on_its_first_attempt(
        producer: Minitask, workers: Minitask) -> None:
    handle = producer.send("shop.add", (1, 2, 3))
    keyword = producer.send("billing.charge", (1,), {"colour": "red"})
    assert run(workers) == 2  # one attempt each, though the task has two retries
    for sent, name, problem in ((handle, "shop.add", "too many positional arguments"),
                                (keyword, "billing.charge",
                                 "unexpected keyword argument 'colour'")):
        assert sent.status() == "failed"
        with pytest.raises(TaskFailed) as failed:
            sent.get(timeout=0)
        assert failed.value.exc_type == "ArgumentError"
        assert failed.value.message.startswith(f"task {name!r}: ")
        assert problem in failed.value.message
    dead = {d.task_id: d for d in workers.dead_letters()}
    assert dead[handle.id].attempts == 1 == dead[keyword.id].attempts
    assert dead[handle.id].reason == "its arguments do not fit the task"


def test_an_error_the_task_raises_is_still_retried(workers: Minitask) -> None:
    calls = []

    @workers.task(name="shop.flaky", retries=2, retry_backoff=0)
    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) < 2:
            raise TypeError("the task's own TypeError")
        return x

    handle = workers.send("shop.flaky", (7,))
    run(workers)
    assert handle.get(timeout=0) == 7 and calls == [7, 7]


def test_an_unknown_name_is_dead_lettered_with_its_hint(
        producer: Minitask, workers: Minitask) -> None:
    handle = producer.send("shop.addd", (1, 2))
    run(workers)
    with pytest.raises(TaskFailed, match="did you mean 'shop.add'") as failed:
        handle.get(timeout=0)
    assert failed.value.exc_type == "UnknownTaskError"


def test_signatures_by_name_make_chains_groups_and_chords(
        producer: Minitask, workers: Minitask) -> None:
    add = workers.tasks["shop.add"]
    steps = chain(producer.signature("shop.add", 1, 2), producer.signature("shop.add", 10))
    in_group = group(producer.signature("shop.add", 1, 1), producer.signature("shop.add", 2, 2))
    summed = chord([producer.signature("shop.add", i, i) for i in range(4)],
                   producer.signature("shop.total"))
    handles = [steps.delay(), in_group.delay(), summed.delay()]
    run(workers)
    assert handles[0].get(timeout=0) == 13
    assert handles[1].get(timeout=0) == [2, 4]
    assert handles[2].get(timeout=0) == 12
    mixed = chain(add.s(1, 2), producer.signature("shop.add", 3))  # beside a task's own
    assert isinstance(mixed.steps[1], Signature)


def test_a_signature_by_name_is_routed_and_takes_set_and_immutable(
        producer: Minitask, workers: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    sig = producer.signature("billing.charge", 300)
    assert repr(sig) == "billing.charge.s(300)"
    handle = sig.delay()
    assert stored(fake_redis, "billing", handle.id).priority == 7
    moved = producer.signature("shop.add", 1).set(queue="special", priority=2).delay(4)
    assert stored(fake_redis, "special", moved.id).priority == 2
    ignoring = chain(producer.signature("shop.add", 1, 2),
                     producer.signature("shop.add", 5, 5).set(immutable=True))
    assert repr(ignoring.steps[1]) == "shop.add.si(5, 5)"
    last = ignoring.delay()
    run(workers)
    assert drain(workers.worker(queues=["special"], burst=True)) == 1
    assert (handle.get(timeout=0), moved.get(timeout=0), last.get(timeout=0)) == (
        "300 EUR", 5, 10)
    with pytest.raises(ConfigurationError, match="immutable must be True or False"):
        producer.signature("shop.add").set(immutable="yes")


def test_a_step_by_name_that_does_not_bind_fails_its_workflow(
        producer: Minitask, workers: Minitask) -> None:
    handle = chain(producer.signature("shop.add", 1, 2),
                   producer.signature("shop.add", 1, 2)).delay()  # 3 arguments at the worker
    run(workers)
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=0)
    assert failed.value.exc_type == "ArgumentError"
    assert "too many positional arguments" in failed.value.message


def test_a_signature_passes_a_keyword_called_name_to_the_task(
        producer: Minitask, workers: Minitask) -> None:
    @workers.task(name="shop.greet")
    def greet(greeting: str, *, name: str) -> str:
        return f"{greeting}, {name}"

    handle = producer.signature("shop.greet", "hello", name="Ada").delay()
    run(workers)
    assert handle.get(timeout=0) == "hello, Ada"


def test_asend_sends_by_name_through_the_async_client_with_the_same_checks(
        clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    workers = Minitask("shop", broker=fakeredis.FakeRedis(server=server), clock=clock,
                       async_broker=fakeredis.FakeAsyncRedis(server=server))

    @workers.task(name="shop.add")
    def add(x: int, y: int) -> int:
        return x + y

    producer = Minitask("shop", broker=fakeredis.FakeRedis(server=server), clock=clock,
                        async_broker=fakeredis.FakeAsyncRedis(server=server),
                        routes={"shop.*": {"queue": "routed"}})

    async def produce() -> Any:
        with pytest.raises(ConfigurationError, match="unknown option.*for asend"):
            await producer.asend("shop.add", (1, 2), retries=1)  # type: ignore[call-arg]
        with pytest.raises(ConfigurationError, match="task name must be a non-empty str"):
            await producer.asend("")
        handle = await producer.asend("shop.add", (2, 3), priority=8)
        local = await workers.asend("shop.add", [4, 5])  # registered: its own aapply_async
        await producer.aclose()
        await workers.aclose()
        return handle, local

    handle, local = asyncio.run(produce())
    assert drain(workers.worker(queues=["routed", "default"], burst=True)) == 2
    assert (handle.get(timeout=0), local.get(timeout=0)) == (5, 9)


def test_sends_by_name_join_a_batch_block_and_go_when_it_ends(
        producer: Minitask, workers: Minitask) -> None:
    with producer.batch() as batch:
        first = producer.send("shop.add", (1, 1))
        second = producer.send("billing.charge", (3,))
        assert len(batch) == 2
        with pytest.raises(BatchNotSent):
            first.status()
    assert (first.status(), second.status()) == ("queued", "queued")
    run(workers)
    assert (first.get(timeout=0), second.get(timeout=0)) == (2, "3 EUR")
