"""A worker's empty-queue marks on a real three-primary Redis Cluster (worker/empties.py):
the queues a worker found empty are skipped until their wake lists hold a token, which
the worker asks about with EXISTS; on a cluster each queue's keys have a slot of their
own (one EXISTS over them all would be refused CROSSSLOT), so it asks one EXISTS each,
in a pipeline (QueueStore.woken). A task sent to a queue the worker had marked empty,
on any primary, is found by its next walk, in queue order.

The worker runs in this process (``run_once``: a walk and no wait, so no wait of its
own takes the token and clears the mark another way); marks last longer than the test
(``RECHECK_MS``), so a walk that found the task found it by its wake list.
"""
from __future__ import annotations

from contextlib import closing
from typing import Any, Iterator, List, Optional, Sequence

import pytest

from minitask import Minitask
from minitask.broker.transport import Transport
from minitask.stores.queue import QueueStore
from minitask.worker import empties
from minitask.worker.loop import Worker
from minitask.worker.sources import QueueSource
from tests.support.scale_kit import unique_app
from tests.support.topologies import Cluster, slot_of

pytestmark = pytest.mark.scale

#: Two queues on each of the three primaries, in an order that mixes them.
PER_SHARD = 2


@pytest.fixture
def app(cluster: Cluster) -> Iterator[Minitask]:
    with closing(Minitask(unique_app("em"), broker=cluster.client())) as made:
        made.ran = []  # type: ignore[attr-defined]

        @made.task(name="work")
        def work(tag: str) -> str:
            made.ran.append(tag)  # type: ignore[attr-defined]
            return tag

        yield made


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Each woken() call's (queues asked, queues woken), and each send_commands() reply
    (None: no packed EXISTS over them all, as on a cluster)."""
    calls: List[Any] = []
    real_woken, real_send = QueueStore.woken, Transport.send_commands

    def woken(self: QueueStore, queues: Sequence[str]) -> List[str]:
        found = real_woken(self, queues)
        calls.append((tuple(queues), list(found)))
        return found

    def send_commands(self: Transport, packed: bytes, count: int,
                      what: str) -> Optional[List[Any]]:
        reply = real_send(self, packed, count, what)
        calls.append(("send_commands", reply))
        return reply

    monkeypatch.setattr(QueueStore, "woken", woken)
    monkeypatch.setattr(Transport, "send_commands", send_commands)
    monkeypatch.setattr(empties, "RECHECK_MS", 600_000)  # (no mark runs out in a test)
    return calls


def _queues(cluster: Cluster, app: Minitask) -> List[str]:
    """Six queues, two on each primary, the primaries taking turns."""
    def owner(queue: str) -> int:
        return cluster.owner_of_slot(slot_of(app.name, queue)).port

    first = cluster.queues_on_distinct_shards(app.name, 3, prefix="p")
    second = {owner(q): q for q in cluster.queues_on_distinct_shards(app.name, 3, prefix="r")}
    queues = [q for one in first for q in (one, second[owner(one)])]
    assert len({owner(q) for q in queues}) == 3, queues
    assert len({slot_of(app.name, q) for q in queues}) == len(queues) == 3 * PER_SHARD
    return queues


def _marked_all(worker: Worker, app: Minitask, queues: List[str]) -> QueueSource:
    assert not worker.run_once()  # every queue fetched, found empty and marked
    source: Any = worker._queues
    assert isinstance(source, QueueSource)
    now = app.clock.now_ms()
    assert all(source.empties.marked(queue, now) for queue in queues)
    return source


def test_a_task_sent_to_a_queue_marked_empty_on_another_primary_is_found(
        cluster: Cluster, app: Minitask, asked: List[Any]) -> None:
    queues = _queues(cluster, app)
    worker = app.worker(queues=queues, prefetch=1)
    source = _marked_all(worker, app, queues)
    asked.clear()
    # the fourth queue: the second primary's, past a queue of each primary marked empty
    app.tasks["work"].apply_async(("late",), queue=queues[3])
    assert worker.run_once()
    assert app.ran == ["late"]  # type: ignore[attr-defined]
    looked = [call for call in asked if call[0] != "send_commands"]
    assert looked, asked  # (the first queue marked: Redis asked about every one at once)
    assert set(looked[0][0]) == set(queues) and looked[0][1] == [queues[3]], asked
    assert ("send_commands", None) in asked  # no EXISTS over them all: one each
    now = app.clock.now_ms()
    assert not source.empties.marked(queues[3], now)  # its mark cleared by its token
    assert all(source.empties.marked(q, now) for q in queues if q != queues[3])
    assert not worker.run_once()


def test_tasks_sent_to_queues_marked_empty_on_every_primary_run_in_queue_order(
        cluster: Cluster, app: Minitask, asked: List[Any]) -> None:
    queues = _queues(cluster, app)
    worker = app.worker(queues=queues, prefetch=1)
    _marked_all(worker, app, queues)
    asked.clear()
    for index in (5, 2, 1, 4):  # sent out of order, on the three primaries
        app.tasks["work"].apply_async((queues[index],), queue=queues[index])
    for _ in range(4):
        assert worker.run_once()
    assert app.ran == [queues[1], queues[2], queues[4], queues[5]]  # type: ignore[attr-defined]
    woken = [call[1] for call in asked if call[0] != "send_commands"]
    assert set(woken[0]) == {queues[1], queues[2], queues[4], queues[5]}, asked
    assert not worker.run_once()
