"""Outcomes the ACL refuses past ``visibility_timeout``, given up (review of fixgiveup):
``record_waiting`` gave up whatever waited once ``persist`` raised, outcomes other slots
put aside after its last try (never tried) among them, and, with the heartbeat's flush
holding the tried ones at that moment, nothing, in an ERROR naming no task and no
queue; the heartbeat's own flush retried refused outcomes for ever, renewing their
leases; ``persist``'s bound counted from a refusal before an outage; the asyncio
pool's spare recording threads were kept listed once ended; ``refused_on`` asked Redis
twice about one key."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List, Optional, Tuple

import pytest

from minitask.errors import BrokerError
from minitask.stores.queue import Delivery
from minitask.stores.results import Ack
from minitask.worker import acl_steps, outages, outcome_batches
from minitask.worker.leases import Holdings, Job
from minitask.worker.outages import RefusedTooLong, persist
from minitask.worker.outcome_batches import OutcomeBatches
from minitask.worker.pools.recording import RecordingThreads

DEADLINE = 30.0


def refusal() -> BrokerError:
    return BrokerError("NOPERM this user has no permissions to access the key",
                       reason="permission")


def job(task_id: str) -> Job:
    return Job("q", Delivery(task_id, b"{}", 1, 0))


def ack(task_id: str) -> Ack:
    return ("q", task_id, b"", 0, 0, b"")


class Clock:
    """``time`` for a module under test: ``sleep`` moves ``monotonic`` on."""

    def __init__(self) -> None:
        self.now = time.monotonic() + 1.0  # past the outcomes put aside by now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Results:
    def __init__(self, on_call: Any) -> None:
        self.on_call = on_call
        self.calls: List[List[str]] = []

    def ack_many(self, entries: List[Ack]) -> List[bool]:
        self.calls.append([entry[1] for entry in entries])
        return list(self.on_call(entries))


class Batches(OutcomeBatches):
    def __init__(self, holdings: Holdings, results: Results, bound: float) -> None:
        transport = type("T", (), {"confirms_writes": lambda self: False})()
        broker = type("B", (), {"results": results, "transport": transport})()
        self._host = type("H", (), {"broker": broker, "visibility_timeout": bound})()
        self._holdings = holdings
        self._stop = threading.Event()


def held(holdings: Holdings, *task_ids: str) -> None:
    jobs = [job(task_id) for task_id in task_ids]
    holdings.hold("q", jobs)
    for one in jobs:
        holdings.defer_ack(one, ack(one.task_id))


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[str, str, str]]:
    told: List[Tuple[str, str, str]] = []

    def released(broker: Any, queue: str, task_id: str, what: str, bound: float,
                 exc: BrokerError) -> str:
        told.append((queue, task_id, what))
        return f"could not {what}"
    monkeypatch.setattr(outcome_batches, "released_said", released)
    return told


def waiting_ids(holdings: Holdings) -> List[str]:
    acks = holdings.take_acks()
    holdings.restore_acks(acks)
    return [one.task_id for one, _ in acks]


def test_an_outcome_put_aside_after_the_last_try_is_not_given_up(
        said: List[Tuple[str, str, str]]) -> None:
    holdings = Holdings()
    held(holdings, "a")
    late = job("b")
    holdings.hold("q", [late])

    def refuse(entries: List[Ack]) -> List[bool]:
        holdings.defer_ack(late, ack("b"))  # another slot's, as this try runs
        raise refusal()
    batches = Batches(holdings, Results(refuse), 0.0)  # the first refusal is the last
    batches.record_waiting()
    assert [task_id for _, task_id, _ in said] == ["a"], said
    assert "task(s) a" in said[0][2] and "b" not in said[0][2], said
    assert waiting_ids(holdings) == ["b"]  # still to record: never tried
    assert [task_id for task_id, _ in holdings.held()] == ["b"]  # a's lease not renewed


def test_nothing_said_when_the_heartbeat_holds_the_refused_outcomes(
        said: List[Tuple[str, str, str]]) -> None:
    holdings = Holdings()
    held(holdings, "a")
    in_flight: List[Tuple[Job, Ack]] = []
    restore = holdings.restore_acks  # the heartbeat's flush takes them as they are put back

    def restored(acks: List[Tuple[Job, Ack]]) -> None:
        restore(acks)
        in_flight.extend(holdings.take_acks())
    holdings.restore_acks = restored  # type: ignore[method-assign]

    def refuse(entries: List[Ack]) -> List[bool]:
        raise refusal()
    Batches(holdings, Results(refuse), 0.0).record_waiting()
    assert said == []  # no ERROR naming no task and no queue
    assert [one.task_id for one, _ in in_flight] == ["a"]
    assert [task_id for task_id, _ in holdings.held()] == ["a"]  # the heartbeat's now


def test_the_heartbeats_flush_gives_refused_outcomes_up_after_the_bound(
        said: List[Tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(outcome_batches, "time", clock)
    holdings = Holdings()
    held(holdings, "a", "b")

    def refuse(entries: List[Ack]) -> List[bool]:
        raise refusal()
    batches = Batches(holdings, Results(refuse), 60.0)
    failures = 0
    for _ in range(200):  # a heartbeat each second, for 200 s
        clock.now += 1.0
        try:
            batches.flush_if_overdue()
        except BrokerError:
            failures += 1
            continue
        break
    assert 55 <= failures <= 65, failures  # refused for the bound, then given up
    assert [task_id for _, task_id, _ in said] == ["a"], said
    assert "task(s) a, b" in said[0][2], said
    assert holdings.waiting_acks() == 0 and holdings.held() == []  # leases not renewed


def test_the_heartbeats_bound_counts_refusals_in_a_row(
        said: List[Tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(outcome_batches, "time", clock)
    holdings = Holdings()
    held(holdings, "a")
    answers = ["permission"] + ["unreachable"] * 100 + ["permission"]

    def step(entries: List[Ack]) -> List[bool]:
        reason = answers.pop(0) if answers else None
        if reason is None:
            return [True]
        raise BrokerError(reason, reason=reason)
    batches = Batches(holdings, Results(step), 60.0)
    for _ in range(200):
        clock.now += 1.0
        try:
            batches.flush_if_overdue()
        except BrokerError:
            continue
    assert said == [] and holdings.waiting_acks() == 0 and holdings.held() == []


def test_persists_bound_counts_refusals_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(outages, "time", clock)
    answers = ["permission"] + ["unreachable"] * 40 + ["permission"]

    def step() -> str:
        if answers:
            reason = answers.pop(0)
            raise BrokerError(reason, reason=reason)
        return "written"
    start = clock.now
    # a refusal, an outage past the bound, one refusal: retried, not given up at once
    assert persist(step, "record a result", refused_for=60.0) == "written"
    assert clock.now - start > 60.0  # (the outage outlasted the bound)


def test_persist_still_gives_up_refusals_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(outages, "time", clock)

    def step() -> str:
        raise refusal()
    with pytest.raises(RefusedTooLong):
        persist(step, "record a result", refused_for=60.0)


def test_an_ended_spare_recording_thread_is_listed_no_more() -> None:
    loop = asyncio.new_event_loop()
    recording = RecordingThreads(loop, 1, 3)

    def waits(times: List[int]) -> Any:
        def step() -> str:
            if times:
                times.pop()
                raise BrokerError("down", reason="unreachable")
            return "written"
        return persist(step, "record an outcome")

    async def main() -> None:
        for _ in range(5):  # five outages: a spare each
            await asyncio.wait_for(recording.run(lambda: waits([1])), DEADLINE)
    try:
        loop.run_until_complete(main())
        with recording._growing:
            listed = len(recording._threads)
        assert listed <= 2, recording._threads  # its own, and at most one spare
    finally:
        recording.close()
        loop.close()


def test_refused_on_asks_once_of_the_messages_key(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: List[str] = []

    def missing_of(client: Any, commands: List[str], key: str) -> List[str]:
        asked.append(key)
        return list(commands)  # nothing allowed: no pattern covers it
    monkeypatch.setattr(acl_steps, "missing_of", missing_of)
    monkeypatch.setattr(acl_steps, "sender_commands", lambda sources: ["evalsha"])

    class Keys:
        messages, base = "m", "b:"

        def result(self, task_id: str) -> str:
            return "r:" + task_id

    class Transport:
        client = sources = None

        def errors(self, what: str) -> Any:
            import contextlib
            return contextlib.nullcontext()
    broker = type("B", (), {"transport": Transport(),
                            "queues": type("Q", (), {"keys": lambda self, q: Keys()})()})()
    refused: Optional[str] = acl_steps.refused_on(broker, "q", "t1")
    assert refused is not None and "'m'" in refused
    assert asked == ["m"]
