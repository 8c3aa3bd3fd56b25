"""The marks of the queues a worker found empty (``worker.empties``): what sets them,
what clears them, and that a mark never hides work for long (issue 29, issue 36)."""
from __future__ import annotations

from typing import List

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from minitask.stores.queue import FetchResult
from minitask.worker.empties import RECHECK_MS, EmptyQueues
from tests.support.clock import ManualClock

NOW = 1_000_000
EMPTY = FetchResult([], [], None)


@pytest.fixture
def empties(app: Minitask) -> EmptyQueues:
    return EmptyQueues(app.broker.queues)


def wake(app: Minitask, queue: str) -> str:
    return app.broker.queues.keys(queue).wake


def test_a_fetch_that_leased_nothing_marks_its_queue_until_its_next_event(
        empties: EmptyQueues) -> None:
    empties.found("a", EMPTY, NOW, empties.epoch)
    empties.found("b", FetchResult([], [], NOW + 2000), NOW, empties.epoch)
    empties.found("c", FetchResult([], [], NOW), NOW, empties.epoch)  # due now: not empty
    assert empties.marked("a", NOW + RECHECK_MS - 1)
    assert not empties.marked("a", NOW + RECHECK_MS)  # fetched again within RECHECK_MS
    assert empties.marked("b", NOW + 1999) and not empties.marked("b", NOW + 2000)
    assert not empties.marked("c", NOW)
    assert empties.skipped(NOW) == frozenset({"a", "b"})
    assert empties.upcoming(NOW) == NOW + 2000  # a wait ends then


def test_a_queue_whose_wake_list_holds_a_token_is_not_skipped(
        app: Minitask, empties: EmptyQueues) -> None:
    for queue in ("a", "b", "c"):
        empties.found(queue, EMPTY, NOW, empties.epoch)
    app.broker.transport.client.rpush(wake(app, "b"), "1")
    assert empties.skipped(NOW) == frozenset({"a", "c"})
    assert not empties.marked("b", NOW)  # the next walk fetches it


def test_a_token_a_wait_took_clears_its_queue_and_older_fetches_mark_nothing(
        app: Minitask, empties: EmptyQueues) -> None:
    empties.found("a", EMPTY, NOW, empties.epoch)
    sent_at = empties.epoch  # a fetch of "b" sent now, its reply read after the wait
    connections = app.broker.transport.connections
    connections.took(wake(app, "a"))
    connections.took(wake(app, "b"))
    empties.took_tokens()
    assert not empties.marked("a", NOW)
    empties.found("b", EMPTY, NOW, sent_at)  # the token came after that fetch ran
    assert not empties.marked("b", NOW)
    empties.found("b", EMPTY, NOW, empties.epoch)
    assert empties.marked("b", NOW)


def test_a_refused_look_at_the_wake_lists_skips_nothing(
        app: Minitask, empties: EmptyQueues, monkeypatch: pytest.MonkeyPatch) -> None:
    empties.found("a", EMPTY, NOW, empties.epoch)

    def refused(queues: List[str]) -> List[str]:
        raise BrokerError("NOPERM this user has no permissions to run the 'exists' command")

    monkeypatch.setattr(app.broker.queues, "woken", refused)
    assert empties.skipped(NOW) == frozenset()
    assert not empties.any_marked()  # fetched, as before marks


QUEUES = [f"q{index}" for index in range(30)]


@pytest.fixture
def ran(app: Minitask) -> List[str]:
    done: List[str] = []

    @app.task(queue=QUEUES[-1], name="work")
    def work(tag: str) -> None:
        done.append(tag)

    return done


def test_a_delayed_task_of_a_queue_found_empty_runs_when_due(
        app: Minitask, clock: ManualClock, ran: List[str]) -> None:
    app.tasks["work"].apply_async(("later",), queue=QUEUES[10], delay=60.0)
    worker = app.worker(queues=QUEUES, prefetch=1)
    assert not worker.run_once()
    assert not worker.run_once()  # queue 10 skipped: its task is not due
    clock.advance(60.0)
    assert worker.run_once()
    assert ran == ["later"]


def test_a_lost_token_hides_a_queue_found_empty_for_recheck_ms_at_most(
        app: Minitask, clock: ManualClock, ran: List[str]) -> None:
    worker = app.worker(queues=QUEUES, prefetch=1)
    assert not worker.run_once()  # every queue found empty
    app.tasks["work"].apply_async(("sent",), queue=QUEUES[5])
    app.broker.transport.client.delete(wake(app, QUEUES[5]))  # a waiter took it and died
    assert not worker.run_once()
    clock.advance(RECHECK_MS / 1000)
    assert worker.run_once()
    assert ran == ["sent"]
