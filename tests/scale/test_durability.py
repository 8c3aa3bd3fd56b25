"""Durability across a failover: no enqueue that returned is lost (guide/durability).

A producer enqueues 2,000 tasks one by one, each retried with its own id until a
``delay()`` returns, while a worker runs them. In the middle the replication
links are cut (the replicas frozen with SIGSTOP) a moment before the primary
is SIGKILLed, so that whatever the primary acknowledged in that moment
exists nowhere else: a build that does not wait for its replicas returns
such enqueues, and loses them. Then the replicas run again, one is promoted,
and producer and worker carry on. Every returned task must run (counted by
id, on a separate marks server); with ``durability=None`` the test only
reports how many were lost.
"""
from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence

import pytest
import redis
import redis.asyncio

from minitask import BrokerError, DurabilityError, Minitask
from minitask.broker.keys import queue_keys
from tests.support.scale_kit import ScaleKit
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster, SentinelGroup, slot_of
from tests.support.waiting import wait_until

# each test's own bounds (RECOVERY, below, for the enqueues, the promotion and the
# drain) add up past pytest-timeout's 120 s: a run on a loaded machine hit it
pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

#: Enough for the kill to fall in the middle of a steady run at each moment; what can be
#: lost is what the primary took in the CUT before it died, whatever the total (5,000
#: took 80 to 115 s a test on a loaded machine).
TASKS = 2000
#: How long the replicas are frozen before the primary dies: writes acknowledged in
#: that moment reach no replica.
CUT = 0.3
#: Bound on everything the producer and worker do after the kill.
RECOVERY = 120.0


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    """Two replicas, so that the promoted one still has a replica to confirm writes."""
    group = SentinelGroup(tmp_path / "sentinel", replica_count=2)
    group.directory.mkdir()
    try:
        group.start()
        yield group
    finally:
        group.stop()


class Producer(threading.Thread):
    """Enqueues ``names`` one by one; each is retried with its id until it returns."""

    def __init__(self, kit: ScaleKit, names: Sequence[str], queue: str) -> None:
        super().__init__(daemon=True)
        self.kit, self.names, self.queue = kit, names, queue
        self.returned: List[str] = []
        self.refusals = 0
        self.failure: Optional[str] = None

    def run(self) -> None:
        task = self.kit.task("record")
        for name in self.names:
            key = self.kit.key(name)
            deadline = time.monotonic() + RECOVERY
            while True:
                try:
                    task.apply_async((key,), queue=self.queue, task_id=key)
                    break
                except BrokerError as exc:  # DurabilityError included: send it again
                    self.refusals += 1
                    if time.monotonic() > deadline:
                        self.failure = f"{name}: {exc}"
                        return
                    time.sleep(0.02)
            self.returned.append(name)


def wait_all_done(kit: ScaleKit, names: Sequence[str]) -> None:
    """``kit.wait_all_done``, asking less often: 2,000 markers per look."""
    wait_until(lambda: kit.done_count(names) == len(names), timeout=RECOVERY, interval=0.5,
               message=f"{len(names)} tasks to be done")


def freeze(servers: Sequence[RedisServer], sig: signal.Signals) -> None:
    for server in servers:
        if server.process is not None and server.process.poll() is None:
            server.process.send_signal(sig)


def cut_links(primary: RedisServer) -> None:
    """Close the primary's replication links: what it takes from now on stays on it."""
    with primary.client(socket_timeout=10) as client:
        client.execute_command("CLIENT", "KILL", "TYPE", "replica")


def run_through_failover(kit: ScaleKit, kill_after: int, primary: RedisServer,
                         replicas: Sequence[RedisServer], kill: Callable[[], None], queue: str,
                         total: int = TASKS) -> Producer:
    """Produce ``total`` tasks; after ``kill_after`` returned, freeze the replicas (so
    they cannot reconnect), cut the primary's links to them, let the producer go on
    for a moment, ``kill()`` the primary and wake the replicas. Returns the finished
    producer. (Freezing alone cuts nothing: the replicas' kernels keep receiving.)"""
    names = [f"t{i}" for i in range(total)]
    producer = Producer(kit, names, queue)
    producer.start()
    wait_until(lambda: len(producer.returned) >= kill_after or not producer.is_alive(),
               timeout=RECOVERY, interval=0.005, message=f"{kill_after} enqueues")
    try:
        freeze(replicas, signal.SIGSTOP)
        cut_links(primary)
        time.sleep(CUT)  # the producer goes on: to the primary alone
        kill()
    finally:
        freeze(replicas, signal.SIGCONT)
    producer.join(RECOVERY + 60)
    assert not producer.is_alive(), "the producer is stuck"
    assert producer.failure is None, producer.failure
    return producer


@pytest.mark.parametrize("moment", [0.2, 0.5, 0.8])
def test_no_returned_replicated_enqueue_is_lost_when_the_primary_dies(
        moment: float, sentinels: SentinelGroup, make_kit: Callable[..., ScaleKit]) -> None:
    primary = sentinels.primary
    assert primary is not None
    kit = make_kit(sentinels.url, sentinels.url, durability="replicated")
    queue = kit.app.default_queue
    kit.worker("--pool", "thread", "-c", "4")
    kit.wait_for_worker()  # a worker starting while Redis fails over exits at once
    producer = run_through_failover(kit, int(TASKS * moment), primary, sentinels.replicas,
                                    primary.stop, queue)
    wait_until(lambda: sentinels.primary_port() != primary.port, timeout=RECOVERY,
               message="a replica to be promoted")
    wait_all_done(kit, producer.returned)
    done = kit.marks_of("done", producer.returned)
    twice = sum(1 for marks in done.values() if len(marks) > 1)
    print(f"durability='replicated', kill after {moment:.0%}: {len(producer.returned)} "
          f"returned, lost 0, run twice {twice}, enqueues refused and retried "
          f"{producer.refusals}")
    assert len(producer.returned) == TASKS


def test_without_durability_returned_enqueues_can_be_lost_and_are_counted(
        sentinels: SentinelGroup, make_kit: Callable[..., ScaleKit]) -> None:
    """The same run with durability=None: reports the loss, asserts nothing about it."""
    primary = sentinels.primary
    assert primary is not None
    kit = make_kit(sentinels.url, sentinels.url)
    queue = kit.app.default_queue
    kit.worker("--pool", "thread", "-c", "4")
    kit.wait_for_worker()  # a worker starting while Redis fails over exits at once
    producer = run_through_failover(kit, TASKS // 5, primary, sentinels.replicas, primary.stop,
                                    queue)
    wait_until(lambda: sentinels.primary_port() != primary.port, timeout=RECOVERY,
               message="a replica to be promoted")
    kit.wait_drained([queue], timeout=RECOVERY)
    done = kit.marks_of("done", producer.returned)
    lost = sorted(name for name, marks in done.items() if not marks)
    print(f"durability=None, kill after 20%: {len(producer.returned)} returned, "
          f"LOST {len(lost)} {lost[:10]}")
    assert len(producer.returned) == TASKS


def test_no_returned_replicated_enqueue_is_lost_when_a_cluster_primary_dies(
        tmp_path: Path, make_kit: Callable[..., ScaleKit]) -> None:
    own = Cluster(tmp_path / "durable-cluster")
    try:
        own.start()
        kit = make_kit(own.url, own.url, durability="replicated")
        queue = "durable"
        doomed = own.owner_of_slot(slot_of(kit.app_name, queue))
        replica = own.add_replica(doomed)
        for node in list(own.nodes[:3]):
            if node is not doomed:
                own.add_replica(node)  # one replica per primary
        kit.worker("-Q", queue, "--pool", "thread", "-c", "4")
        kit.wait_for_worker()

        def kill_and_rejoin() -> None:
            doomed.stop()  # SIGKILL
            threading.Thread(target=_rejoin, args=(own, doomed, replica), daemon=True).start()
        producer = run_through_failover(kit, 1000, doomed, [replica], kill_and_rejoin, queue,
                                        total=2000)
        assert own.owner_of_slot(slot_of(kit.app_name, queue),
                                 via=own.live_nodes()[0]) is replica
        wait_all_done(kit, producer.returned)
        print(f"cluster, durability='replicated': {len(producer.returned)} returned, lost 0, "
              f"enqueues refused and retried {producer.refusals}")
        assert len(producer.returned) == 2000
    finally:
        own.stop()


def _rejoin(cluster: Cluster, old: RedisServer, promoted: RedisServer) -> None:
    """Once the replica is promoted, start the old primary again (its nodes.conf kept):
    it rejoins as the new primary's replica, so that writes there can be confirmed."""
    try:
        wait_until(lambda: _serves_as_primary(promoted), timeout=RECOVERY, interval=0.1,
                   message="the replica to be promoted")
        old.start()
    except (AssertionError, OSError) as exc:
        print(f"rejoin failed: {exc}")


def _serves_as_primary(server: RedisServer) -> bool:
    try:
        with server.client(socket_timeout=5) as client:
            return client.info("replication").get("role") == "master"
    except Exception:  # still frozen or starting: ask again
        return False


def test_an_async_replicated_enqueue_on_a_cluster_waits_for_its_shards_replica(
        tmp_path: Path) -> None:
    """An async producer on Redis Cluster (``async_broker=`` a redis.asyncio cluster
    client): the touch and WAIT go to the queue's primary on the connection that
    wrote, so the enqueue returns once that shard's replica has it, and fails
    clearly, naming the task, while the replica does not answer."""
    own = Cluster(tmp_path / "async-cluster")
    app: Optional[Minitask] = None
    try:
        own.start()
        replica = own.add_replica(own.owner_of_slot(slot_of("adurable", "durable")))
        assert replica.process is not None
        stopped = replica.process
        app = Minitask("adurable", broker=own.url, durability="replicated",
                       durability_timeout=5,
                       async_broker=redis.asyncio.RedisCluster(
                           host="127.0.0.1", port=own.nodes[0].port, socket_timeout=60))

        @app.task(name="add", queue="durable")
        def add(a: int, b: int) -> int:
            return a + b
        woken: List[float] = []

        def wake() -> None:
            stopped.send_signal(signal.SIGCONT)
            woken.append(time.monotonic())

        async def scenario() -> None:
            assert app is not None
            stopped.send_signal(signal.SIGSTOP)
            timer = threading.Timer(0.5, wake)
            timer.start()
            try:
                handle = await add.aapply_async((1, 2), task_id="a-1")
                returned = time.monotonic()
            finally:
                timer.join()
            assert returned >= woken[0], "returned before the shard's replica could have it"
            with replica.client(socket_timeout=10) as client:
                client.execute_command("READONLY")  # a cluster replica answers reads then
                assert client.hexists(queue_keys("adurable", "durable").messages, handle.id)
            stopped.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(DurabilityError) as caught:
                    await add.aapply_async((1, 2), task_id="a-2")
            finally:
                stopped.send_signal(signal.SIGCONT)
            assert caught.value.task_id == "a-2" and "'add'" in str(caught.value)
            await app.aclose()
        asyncio.run(scenario())
    finally:
        if app is not None:
            app.close()
        for server in own.nodes:
            if server.process is not None:
                server.process.send_signal(signal.SIGCONT)
        own.stop()
