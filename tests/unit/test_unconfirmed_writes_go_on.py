"""A write replicas did not confirm in time stops none of the writes after it, where
Redis Cluster sends them one call at a time (one per slot): an ``app.batch()`` block's
queues and a workflow's calls are all sent, then one DurabilityError names what was
written unconfirmed (probe29j N3 and a LOW). A block around them (a worker's
``persist``) takes the errors and gets every reply. ``persist`` keeps what an attempt
kept when a later one fails and is written again (the first warning was lost).

Redis Cluster is stood in for by a transport with no pool (as ``Connections`` has
on a cluster) whose calls answer as the real ones do: ``Durability.check`` on WAIT's
reply of 0 replicas.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, List, Sequence, Set

import pytest

from minitask.broker.durability import Durability, keep_unconfirmed
from minitask.broker.transport import Transport
from minitask.errors import BrokerError, DurabilityError
from minitask.stores.queue import QueueStore
from minitask.worker import outages

DURABLE = Durability("replicated", 1, 0.2)


def _cluster_transport(unconfirmed: Set[int], ran: List[Any]) -> Transport:
    """A Transport as on Redis Cluster: each call run alone; the calls whose order is
    in ``unconfirmed`` written but not confirmed (WAIT says 0 replicas)."""
    transport = object.__new__(Transport)
    transport.durability = DURABLE
    transport.connections = SimpleNamespace(pool=None)  # type: ignore[assignment]
    transport.description = "fake cluster"
    transport.acl_unchecked = False  # (its ACL check before a first send: passed)

    def run(name: str, keys: Sequence[str], args: Sequence[Any], what: str,
            durability: Any = None) -> Any:
        ran.append(name)
        if len(ran) - 1 in unconfirmed:
            durability.check(0, what, "fake cluster")
        return len(ran)
    transport.run = run  # type: ignore[method-assign]
    return transport


def _calls(count: int) -> List[Any]:
    return [("spawn", f"slot{i}", (f"k{i}",), [f"a{i}"], 0) for i in range(count)]


def test_a_cluster_workflow_sends_every_call_then_raises_once() -> None:
    ran: List[Any] = []
    transport = _cluster_transport({0, 2}, ran)
    with pytest.raises(DurabilityError) as caught:
        transport.run_calls(_calls(4), "send 4 workflow step(s)")
    assert len(ran) == 4  # the first unconfirmed call stopped the other three
    assert "0 of 1 replica" in str(caught.value)


def test_inside_a_kept_block_a_cluster_send_answers_with_every_reply() -> None:
    """A worker's step (``persist``): the replies come back, the outer block has the
    errors, nothing is raised (raised, the step's replies would be lost)."""
    ran: List[Any] = []
    transport = _cluster_transport({1}, ran)
    with keep_unconfirmed() as kept:
        replies = transport.run_calls(_calls(3), "ack and spawn")
    assert replies == [1, 2, 3] and len(kept) == 1
    with pytest.raises(DurabilityError) as caught:  # the holder's to say: no ids noted,
        kept.raise_any()  # the error as it is
    assert caught.value is kept[0]


class _ClusterQueues(QueueStore):
    """A QueueStore on a ``_cluster_transport``'s kind of transport: its calls by queue."""

    def __init__(self, unconfirmed: Set[str], refused: Set[str]) -> None:
        self.transport = SimpleNamespace(  # type: ignore[assignment]
            connections=SimpleNamespace(pool=None), description="fake cluster",
            run_calls=self._run_calls)
        self.app_name = "app"
        self._known_queues = dict.fromkeys(("q1", "q2", "q3", "q4"), float("inf"))
        self.sent: List[str] = []
        self.unconfirmed, self.refused = unconfirmed, refused

    def _run_calls(self, calls: Sequence[Any], what: str) -> List[Any]:
        (call,) = calls
        queue = call[1]
        if queue in self.refused:
            raise BrokerError(f"could not {what}: WRONGTYPE {queue}", reason="wrong type")
        self.sent.append(queue)
        if queue in self.unconfirmed:
            DURABLE.check(0, what, "fake cluster")
        return [call[4]]


def _entries(queue: str, count: int) -> List[Any]:
    return [(f"{queue}-{n}", b"body", 0, 0) for n in range(count)]


def test_a_cluster_batch_sends_every_slot_and_names_every_task_written_unconfirmed() -> None:
    store = _ClusterQueues(unconfirmed={"q1", "q3"}, refused=set())
    by_queue = {q: _entries(q, 3) for q in ("q1", "q2", "q3", "q4")}
    with pytest.raises(DurabilityError) as caught:
        store.enqueue_queues(by_queue, 0, 2)  # chunks of 2: q1 and q3 in two calls each
    assert store.sent == ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"]
    assert caught.value.task_ids == [f"q1-{n}" for n in range(3)] + \
        [f"q3-{n}" for n in range(3)]
    assert caught.value.task_id == "q1-0"


def test_a_cluster_batch_redis_refused_is_the_refusal_it_was() -> None:
    store = _ClusterQueues(unconfirmed={"q1"}, refused={"q2"})
    by_queue = {q: _entries(q, 1) for q in ("q1", "q2", "q3")}
    with pytest.raises(BrokerError) as caught:
        store.enqueue_queues(by_queue, 0, 10)
    assert not isinstance(caught.value, DurabilityError)
    assert "1 of its 3 call(s) enqueued" in str(caught.value), str(caught.value)
    assert store.sent == ["q1"]  # (a refusal stops the block, as it did)


def test_persist_keeps_an_attempts_unconfirmed_write_when_a_later_one_fails(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The first attempt writes (unconfirmed), then meets an outage; the second
    succeeds: the first write's warning is said."""
    monkeypatch.setattr(outages.time, "sleep", lambda seconds: None)
    attempts: List[int] = []

    def step() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            DURABLE.check(0, "ack task t-1", "fake")  # kept: Redis wrote it
            raise BrokerError("Redis is unreachable", reason="unreachable")
        return "done"
    with caplog.at_level(logging.ERROR):
        assert outages.persist(step, "ack task t-1") == "done"
    said = [r.getMessage() for r in caplog.records
            if "replicas did not confirm" in r.getMessage()]
    assert len(attempts) == 2 and len(said) == 1 and "ack task t-1" in said[0], said
