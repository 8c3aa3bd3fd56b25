"""app.batch(): calls made inside the block are checked at once and sent together
when it ends, in one write (one script call per queue); an exception sends nothing.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, List, Tuple

import pytest

from minitask import (ArgumentError, BatchNotSent, BrokerError, ConfigurationError, Minitask,
                      chain)
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain


class Boom(Exception):
    pass


def stored(app: Minitask, queue: str) -> int:
    """Messages held for ``queue`` (ready or scheduled)."""
    return int(app.broker.transport.client.hlen(QueueKeys(app.name, queue).messages))


def shop(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Dict[str, Any]]:
    app = make_app("shop")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(queue="emails")
    def mail(to: str) -> str:
        return f"mailed {to}"

    return app, {"add": add, "mail": mail}


def spy_writes(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """Each run_calls the broker makes, as its number of script calls."""
    transport = app.broker.transport
    writes: List[int] = []
    real = transport.run_calls

    def counted(calls: Any, what: str, **options: Any) -> Any:
        writes.append(len(calls))
        return real(calls, what, **options)

    monkeypatch.setattr(transport, "run_calls", counted)
    return writes


def test_calls_in_a_block_are_sent_together_when_it_ends(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch) -> None:
    app, tasks = shop(make_app)
    app.broker.queues.register_queues(["default", "emails"])  # what a first send does
    writes = spy_writes(app, monkeypatch)
    with app.batch() as batch:
        first = tasks["add"].delay(1, 2)
        later = tasks["add"].apply_in(60, 3, 4)
        mailed = tasks["mail"].delay("ann@example.com")
        assert len(batch) == 3
        assert stored(app, "default") == stored(app, "emails") == 0 and writes == []
        with pytest.raises(BatchNotSent, match="has not ended yet"):
            first.status()
        with pytest.raises(BatchNotSent, match=first.id):
            first.get(timeout=1)
    assert writes == [2]  # one write: one script call per queue
    assert (first.status(), later.status(), mailed.status()) == ("queued", "scheduled", "queued")
    assert drain(app.worker(queues=["default", "emails"], burst=True)) == 2
    assert first.get(timeout=5) == 3 and mailed.get(timeout=5) == "mailed ann@example.com"
    app.clock.advance(61)  # type: ignore[attr-defined]
    assert drain(app.worker(burst=True)) == 1 and later.get(timeout=5) == 7


def test_an_exception_in_the_block_sends_nothing(make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    with pytest.raises(Boom):
        with app.batch():
            handle = tasks["add"].delay(1, 2)
            tasks["mail"].apply_in(5, "bob@example.com")
            raise Boom("the database transaction failed")
    assert stored(app, "default") == stored(app, "emails") == 0
    with pytest.raises(BatchNotSent, match="ended with an exception"):
        handle.status()
    tasks["add"].delay(5, 6)  # outside any block: sent at once
    assert stored(app, "default") == 1


def test_a_call_refused_in_the_block_raises_there_and_the_block_sends_nothing(
        make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    with pytest.raises(ArgumentError, match="add"):
        with app.batch():
            tasks["add"].delay(1, 2)
            tasks["add"].delay(1, 2, 3)  # checked when called, not when the block ends
    assert stored(app, "default") == 0


def test_nested_blocks_are_sent_by_the_outermost_and_an_inner_exception_drops_its_own(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch) -> None:
    app, tasks = shop(make_app)
    app.broker.queues.register_queues(["default", "emails"])
    writes = spy_writes(app, monkeypatch)
    with app.batch() as outer:
        kept = tasks["add"].delay(1, 1)
        with app.batch():
            inner = tasks["mail"].delay("carl@example.com")
        assert stored(app, "emails") == 0 and len(outer) == 2
        with pytest.raises(BatchNotSent, match="has not ended yet"):
            inner.status()
        try:
            with app.batch():
                dropped = tasks["add"].delay(2, 2)
                raise Boom()
        except Boom:
            pass
        assert len(outer) == 2
    assert writes == [2]
    assert kept.status() == inner.status() == "queued"
    with pytest.raises(BatchNotSent, match="ended with an exception"):
        dropped.status()
    assert stored(app, "default") == stored(app, "emails") == 1


def test_a_batch_is_its_own_threads_alone(make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    other: List[Any] = []
    with app.batch() as batch:
        tasks["add"].delay(1, 2)
        thread = threading.Thread(target=lambda: other.append(tasks["mail"].delay("dee@x.org")))
        thread.start()
        thread.join(timeout=30)
        assert len(batch) == 1  # the other thread's call went at once
        assert stored(app, "emails") == 1 and stored(app, "default") == 0
        assert other[0].status() == "queued"
    assert stored(app, "default") == 1


def test_another_apps_calls_are_not_held_by_this_apps_block(
        make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    other = make_app("other")

    @other.task
    def ping() -> str:
        return "pong"

    with app.batch():
        tasks["add"].delay(1, 2)
        assert ping.delay().status() == "queued"
        assert stored(app, "default") == 0


def test_a_queue_refused_at_the_end_keeps_none_of_its_calls(
        make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    client = app.broker.transport.client
    client.set(QueueKeys(app.name, "emails").messages, "not minitask's")  # another type
    with pytest.raises(BrokerError):
        with app.batch():
            tasks["add"].delay(1, 2)
            handles = [tasks["mail"].delay(f"{n}@example.com") for n in range(3)]
    assert client.get(QueueKeys(app.name, "emails").messages) == b"not minitask's"
    with pytest.raises(BatchNotSent, match="not enqueued"):
        handles[0].status()
    assert stored(app, "default") == 1  # the other queue's call stands on its own


def test_a_refused_queue_is_named_alone_and_the_queues_written_are_said_so(
        make_app: Callable[..., Minitask]) -> None:
    # a caller retrying what the error says was not enqueued must not run the rest twice
    app, tasks = shop(make_app)
    client = app.broker.transport.client
    client.set(QueueKeys(app.name, "emails").messages, "not minitask's")  # another type
    with pytest.raises(BrokerError) as raised:
        with app.batch():
            added = tasks["add"].delay(1, 2)
            mailed = tasks["mail"].delay("a@example.com")
    said = str(raised.value)
    # what happened first, then each part: never "nothing was changed" of a block that
    # enqueued something (the script's words were of its own queue's call)
    assert said.startswith("app.batch() block partly enqueued (broker ")
    assert "1 of its 2 call(s) enqueued, 1 not;" in said
    assert "nothing was changed" not in said and "none of this queue's calls was written" in said
    refused, _, enqueued = said.partition("enqueued, and they will run (do not send them again)")
    assert "not enqueued: queue 'emails'" in refused and mailed.id in refused
    assert "'default'" not in refused and added.id not in refused
    assert "queue 'default'" in enqueued and added.id in enqueued and "add" in enqueued
    assert "'emails'" not in enqueued
    assert enqueued.endswith("then send again only the calls not enqueued")
    assert raised.value.reason in ("wrong type", "script")  # refused: data, no outage
    assert stored(app, "default") == 1


def test_a_block_refused_whole_says_none_of_its_calls_was_enqueued(
        make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    client = app.broker.transport.client
    client.set(QueueKeys(app.name, "emails").messages, "not minitask's")  # another type
    with pytest.raises(BrokerError) as raised:
        with app.batch():
            mailed = [tasks["mail"].delay(f"{n}@example.com") for n in range(3)]
    said = str(raised.value)
    assert said.startswith("app.batch() block not enqueued (broker ")
    assert "0 of its 3 call(s) enqueued, 3 not;" in said
    assert "not enqueued: queue 'emails': 3 call(s)" in said
    assert all(handle.id in said for handle in mailed)
    assert "will run" not in said and "nothing was changed" not in said
    assert said.endswith("nothing of the block was written: fix what the refusal names, "
                         "then send the block again")
    assert client.get(QueueKeys(app.name, "emails").messages) == b"not minitask's"


def test_a_workflow_is_refused_inside_a_block(make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)
    with pytest.raises(ConfigurationError, match="inside an app.batch"):
        with app.batch():
            chain(tasks["add"].s(1, 2), tasks["add"].s(3)).delay()
    assert stored(app, "default") == 0


def test_adelay_in_a_block_joins_it(make_app: Callable[..., Minitask]) -> None:
    app, tasks = shop(make_app)

    async def send() -> None:
        await tasks["add"].adelay(1, 2)
        await app.aclose()

    with app.batch() as batch:
        asyncio.run(send())
        assert len(batch) == 1 and stored(app, "default") == 0
    assert stored(app, "default") == 1


def test_calls_a_block_cannot_hold_are_refused_and_the_block_sends_nothing(
        make_app: Callable[..., Minitask]) -> None:
    """A block is confirmed as the app says: a durability of the call's own and a
    broadcast are refused where they are made (flow-controlled and grouped calls join
    it: tests/unit/test_fair_compose.py)."""
    app, tasks = shop(make_app)

    @app.task(broadcast=True, queue="news")
    def announce() -> None:
        pass

    attempts: List[Callable[[], Any]] = [
        lambda: tasks["add"].apply_async((1, 2), durability=None),
        announce.delay,
    ]
    for attempt in attempts:
        with pytest.raises(ConfigurationError, match="app.batch"):
            with app.batch():
                tasks["mail"].delay("ann@example.com")
                attempt()
    assert stored(app, "default") == stored(app, "emails") == 0
