"""On a real Redis Cluster (three primaries, one replica each), a send that goes a call
per slot makes every call when one slot's replica does not confirm in time (stopped
with SIGSTOP), then raises one DurabilityError (probe29j N3 and a LOW): an
``app.batch()`` block over three slots enqueues every queue's tasks and names each task
written unconfirmed; a group over three slots sends every member. The first
unconfirmed call stopped both before: the later slots' tasks were never sent.
"""
from __future__ import annotations

import signal
from typing import Iterator, List, Tuple

import pytest

from minitask import DurabilityError, Minitask, group
from minitask.broker.keys import queue_keys
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

APP = "unconfirmed-slots"


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Tuple[Cluster, List[RedisServer]]]:
    """A cluster of three primaries, each with a replica (in ``nodes`` order)."""
    own = Cluster(tmp_path_factory.mktemp("unconfirmed-cluster"))
    try:
        own.start()
        primaries = list(own.nodes)
        yield own, [own.add_replica(node) for node in primaries]
    finally:
        for server in own.nodes:
            if server.process is not None:
                server.process.send_signal(signal.SIGCONT)
        own.stop()


def _queues(own: Cluster) -> List[str]:
    """Three queue names of ``APP``, one on each primary, in the nodes' order."""
    found = {}
    for n in range(1000):
        owner = own.owner_of_slot(slot_of(APP, f"q{n}"))
        found.setdefault(owner.port, f"q{n}")
        if len(found) == 3:
            break
    return [found[node.port] for node in own.nodes[:3]]


def _app(own: Cluster, queues: List[str]) -> Minitask:
    app = Minitask(APP, broker=own.url, durability="replicated", durability_timeout=0.3)
    for queue in queues:
        app.task(name=f"add-{queue}", queue=queue)(lambda a, b=0: a + b)
    return app


def test_a_batch_and_a_group_send_every_slot_while_one_replica_is_stopped(
        replicated: Tuple[Cluster, List[RedisServer]]) -> None:
    own, replicas = replicated
    queues = _queues(own)
    app = _app(own, queues)
    stopped = replicas[0].process  # the replica of the first queue's primary
    assert stopped is not None
    try:
        stopped.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(DurabilityError) as batch_error:
                with app.batch():
                    handles = [app.tasks[f"add-{q}"].delay(n) for q in queues
                               for n in range(3)]
            with pytest.raises(DurabilityError) as group_error:
                group([app.tasks[f"add-{q}"].s(n) for q in queues for n in range(2)]).delay()
        finally:
            stopped.send_signal(signal.SIGCONT)
        # every slot's tasks written; those of the stopped replica's slot named
        assert batch_error.value.task_ids == [h.id for h in handles[:3]], str(batch_error.value)
        assert [h.status() for h in handles] == ["queued"] * 9  # handles stand
        for queue in queues:
            owner = own.owner_of_slot(slot_of(APP, queue))
            with owner.client() as client:
                assert client.hlen(queue_keys(APP, queue).messages) == 5, queue
        members = app.group_handle(group_error.value.task_id).handles
        assert [h.status() for h in members] == ["queued"] * 6
    finally:
        app.close()
