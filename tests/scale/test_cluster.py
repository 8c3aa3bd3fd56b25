"""Everything minitask does, on a real three-primary Redis Cluster.

Queue names are chosen so that the queues of one test live on three
different primaries; every test asserts that first.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from minitask import Retry, TaskFailed, current_task
from tests.support.acl import documented_acl
from tests.support.processes import kill_group
from tests.support.procfs import pid_running
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster, SentinelGroup, slot_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale


def spread_queues(cluster: Cluster, kit: ScaleKit, count: int = 3) -> List[str]:
    queues = cluster.queues_on_distinct_shards(kit.app_name, count)
    owners = {cluster.owner_of_slot(slot_of(kit.app_name, q)).port for q in queues}
    assert len(owners) == count, f"queues {queues} share a primary"
    return queues


#: what the docs (docs/guide/scaling.rst) say a cluster needs on top of the ACL list
CLUSTER_EXTRA = ("+cluster|slots", "+command")
OWN_COMMANDS = ("cmdstat_info", "cmdstat_hello", "cmdstat_client")


def command_calls(cluster: Cluster) -> Dict[str, int]:
    """Commands the cluster's primaries have served so far, by name (all clients)."""
    total: Dict[str, int] = {}
    for node in cluster.live_nodes():
        with node.client() as client:
            for name, stats in client.info("commandstats").items():
                total[name] = total.get(name, 0) + int(stats["calls"])
    return total


def test_every_operation_works_with_a_cluster_client_and_queues_on_three_shards(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    queues = spread_queues(cluster, kit)
    app = kit.app
    ran: List[Tuple[str, int]] = []
    ran_at: Dict[Tuple[str, int], float] = {}

    @app.task(name="order")
    def order(queue: str, n: int) -> int:
        ran.append((queue, n))
        ran_at[queue, n] = time.time()
        return n

    @app.task(name="fail_once", retries=1, retry_backoff=0.01)
    def fail_once() -> str:
        if current_task().attempt == 1:  # type: ignore[union-attr]
            raise Retry(delay=0.05)
        return "second"

    @app.task(name="fails")
    def fails() -> None:
        raise KeyError("broken")

    # the delayed task has the lowest priority: on a loaded machine it may be due before
    # the worker takes the others (it then joins at its priority, below them all), and
    # with the default priority 5 it ran before priority 1's task (failed once so)
    handles: Dict[str, List[Any]] = {}
    sent_at: Dict[str, float] = {}
    for queue in queues:
        handles[queue] = [order.apply_async((queue, n), queue=queue, priority=p)
                          for n, p in ((0, 1), (1, 9), (2, 5), (3, 9))]
        sent_at[queue] = time.time()
        handles[queue].append(order.apply_async((queue, 100), queue=queue, delay=0.3,
                                                priority=0))
    cancelled = order.apply_async((queues[0], 999), queue=queues[0])
    retried = fail_once.apply_async(queue=queues[1])
    dead = fails.apply_async(queue=queues[2])

    assert cancelled.cancel() is True
    assert cancelled.status() == "cancelled"
    assert handles[queues[0]][0].status() == "queued"
    assert handles[queues[1]][4].status() == "scheduled"
    assert app.broker.queues.counts(queues[0])["ready"] >= 4
    assert app.broker.queues.counts(queues[2])["scheduled"] == 1

    worker = app.worker(queues=queues)
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        for queue in queues:
            assert [h.get(timeout=DEADLINE) for h in handles[queue]] == [0, 1, 2, 3, 100]
        assert retried.get(timeout=DEADLINE) == "second"
        with pytest.raises(TaskFailed) as failure:
            dead.get(timeout=DEADLINE)
        assert failure.value.exc_type == "KeyError"
        wait_until(lambda: app.broker.registry.live(app.clock.now_ms(), 60_000), timeout=DEADLINE,
                   message="the worker's heartbeat")

        for queue in queues:
            assert [n for q, n in ran if q == queue] == [1, 3, 2, 0, 100], f"order in {queue}"
            # held until due (less a millisecond's rounding), however late it then ran
            assert ran_at[queue, 100] >= sent_at[queue] + 0.3 - 0.002, f"early in {queue}"
        assert app.handle(retried.id).status() == "succeeded"  # its queue found by id alone
        assert app.handle(cancelled.id).status() == "cancelled"

        letters = app.dead_letters()
        assert [(d.task_id, d.queue, d.exc_type) for d in letters] == [
            (dead.id, queues[2], "KeyError")]
        assert app.requeue_dead(dead.id) is True
        wait_until(lambda: app.broker.queues.counts(queues[2])["dead"] == 1 and
                   app.handle(dead.id).status() == "failed", timeout=DEADLINE,
                   message="the requeued task to die again")
        assert app.purge_dead(dead.id) == 1
    finally:
        worker.stop()
        runner.join(timeout=DEADLINE)
    assert not runner.is_alive()
    left = kit.left_in(queues)
    assert all(not any(counts.values()) for counts in left.values()), left


def test_worker_on_three_shards_wakes_for_each_queue_and_idles_without_polling(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.url, cluster.url)
    queues = spread_queues(cluster, kit)
    kit.worker("-Q", ",".join(queues), "--pool", "thread", "-c", "2")
    kit.wait_for_worker()
    # every queue served once, so each of the worker's BLPOPs is in place
    names = [f"warm-{q}" for q in queues]
    for name, queue in zip(names, queues):
        kit.enqueue("record", name, queue=queue)
    kit.wait_all_done(names)

    before = command_calls(cluster)
    time.sleep(3.0)
    after = command_calls(cluster)
    # this test's own connections (HELLO, CLIENT SETINFO, INFO) are not the worker's
    used = {name: calls - before.get(name, 0) for name, calls in after.items()
            if calls > before.get(name, 0) and not name.startswith(OWN_COMMANDS)}
    print(f"idle worker on 3 shards, commands in 3 s (script calls included): {used}")
    # a BLPOP and a fetch script per queue every 5 s at most (the counts include the
    # commands scripts call, and the heartbeat's ZADD, HSET, PEXPIRE every 0.67 s)
    waits = used.get("cmdstat_blpop", 0) + used.get("cmdstat_evalsha", 0)
    assert waits <= 12, f"{used} in 3 s of idling: polling?"

    # the last queue first: a wake-up on any shard is heard while the others block
    for queue in reversed(queues):
        name = f"wake-{queue}"
        started = time.monotonic()
        kit.enqueue("record", name, queue=queue)
        kit.wait_all_done([name], timeout=DEADLINE)
        elapsed = time.monotonic() - started
        assert elapsed < 3.0, f"{queue}: done after {elapsed:.2f} s: no wake-up (BLPOP lasts 5 s)"


def test_sigkilled_worker_on_a_cluster_loses_nothing(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.url, cluster.url)
    queues = spread_queues(cluster, kit)
    names = [f"k{i}" for i in range(12)]
    for index, name in enumerate(names):
        kit.enqueue("slow", name, 1.0, queue=queues[index % 3])
    first = kit.worker("-Q", ",".join(queues), "--pool", "process", "-c", "2")
    wait_until(lambda: sum(1 for m in kit.marks_of("started", names).values() if m) >= 2,
               timeout=DEADLINE, message="two tasks to start")
    kill_group(first)
    started_before = kit.marks_of("started", names)
    done_before = kit.marks_of("done", names)
    interrupted = [n for n in names if started_before[n] and not done_before[n]]
    assert interrupted, "the kill was meant to land while tasks ran"
    assert not pid_running(first.pid)

    kit.worker("-Q", ",".join(queues), "--pool", "process", "-c", "2")
    kit.wait_all_done(names)
    kit.wait_drained(queues)
    done = kit.marks_of("done", names)
    started = kit.marks_of("started", names)
    for name in names:
        assert len(done[name]) == 1, f"{name} done once: {done[name]}"
        assert len(started[name]) == (2 if name in interrupted else 1), started[name]


def test_retries_dead_letters_status_and_cancel_through_a_worker_process(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.url, cluster.url)
    queues = spread_queues(cluster, kit)
    flaky = kit.task("flaky").apply_async((kit.key("flaky"),), queue=queues[0])
    doomed = kit.task("doomed").apply_async((kit.key("doomed"),), queue=queues[1])
    later = kit.task("record").apply_async((kit.key("later"),), queue=queues[2], delay=60)
    assert later.status() == "scheduled"
    kit.worker("-Q", ",".join(queues), "--pool", "thread", "-c", "2")
    assert flaky.get(timeout=DEADLINE) == "second attempt"
    with pytest.raises(TaskFailed):
        doomed.get(timeout=DEADLINE)
    assert later.cancel() is True
    assert [(d.task_id, d.attempts) for d in kit.app.dead_letters()] == [(doomed.id, 2)]
    assert later.status() == "cancelled"
    kit.wait_for_worker(processed=1)
    counts = kit.app.broker.queues.counts(queues[1])
    assert counts["dead"] == 1 and counts["ready"] == 0

    # `minitask status` on the cluster: per-queue pipelines, the app-wide worker records
    log = kit.logs / "status.json"
    status = kit.processes.start("-m", "minitask", "status", "-A", "tests.apps.scale", "--json",
                                 env=kit.worker_env(), log=log)
    assert status.wait(timeout=DEADLINE) == 0, log.read_text()
    report = json.loads(log.read_text())
    assert report["queues"][queues[1]]["dead"] == 1
    assert [w["queues"] for w in report["workers"]] == [",".join(queues)]
    assert report["workers"][0]["processed"] >= 1


def test_scripts_are_loaded_again_after_a_script_flush_on_every_node(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    queues = spread_queues(cluster, kit)
    app = kit.app

    @app.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    first = [double.apply_async((i,), queue=q) for i, q in enumerate(queues)]
    app.worker(queues=queues, burst=True).run()
    assert [h.get(timeout=DEADLINE) for h in first] == [0, 2, 4]
    for node in cluster.live_nodes():
        with node.client() as admin:
            admin.script_flush()
    # every script runs again: enqueue, state, fetch, ack (NOSCRIPT -> SCRIPT LOAD)
    again = [double.apply_async((i,), queue=q) for i, q in enumerate(queues)]
    assert [h.status() for h in again] == ["queued"] * 3
    app.worker(queues=queues, burst=True).run()
    assert [h.get(timeout=DEADLINE) for h in again] == [0, 2, 4]


def test_a_queue_keeps_working_while_its_slot_moves_to_another_primary(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.url, cluster.url)
    queues = spread_queues(cluster, kit, 2)
    moving = queues[0]
    slot = slot_of(kit.app_name, moving)
    source = cluster.owner_of_slot(slot)
    target = cluster.owner_of_slot(slot_of(kit.app_name, queues[1]))
    kit.worker("-Q", ",".join(queues), "--pool", "thread", "-c", "2")
    kit.wait_for_worker()

    names: List[str] = []
    stop = threading.Event()
    acked: List[str] = []

    def produce() -> None:
        index = 0
        while not stop.is_set() and index < 400:
            name = f"m{index}"
            kit.enqueue("slow", name, 0.01, queue=moving)
            acked.append(name)
            index += 1
            time.sleep(0.005)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_until(lambda: len(acked) >= 60, timeout=DEADLINE, message="tasks before the move")
        done_before = kit.done_count(list(acked))
        enqueued_before = len(acked)
        moved_keys = cluster.move_slot(slot, target)
        enqueued_after_move = len(acked)
        done_after_move = kit.done_count(list(acked))
        wait_until(lambda: len(acked) >= enqueued_after_move + 60, timeout=DEADLINE,
                   message="tasks after the move")
    finally:
        stop.set()
        producer.join(timeout=DEADLINE)
    names = list(acked)
    kit.wait_all_done(names)
    assert cluster.owner_of_slot(slot) is target and source is not target
    done = kit.marks_of("done", names)
    duplicates = {n: m for n, m in done.items() if len(m) > 1}
    crossed = enqueued_before - done_before
    print(f"resharding: {moved_keys} keys moved; {crossed} task(s) were queued when the move "
          f"started, {enqueued_after_move - enqueued_before} enqueued during it, "
          f"{done_after_move - done_before} done during it; {len(names)} in all, "
          f"{len(names) - kit.done_count(names)} lost, {len(duplicates)} run twice")
    assert kit.done_count(names) == len(names)
    assert not duplicates
    # the worker kept going on the other queue too, on the node that received the slot
    kit.enqueue("record", "after", queue=queues[1])
    kit.wait_all_done(["after"])


def test_an_acl_user_with_the_documented_commands_runs_everything_on_a_cluster(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    password = "Cl-9b1e"
    for node in cluster.live_nodes():
        with node.client() as admin:
            admin.execute_command("ACL", "SETUSER", "mtc", "reset", "on", f">{password}",
                                  *documented_acl(), *CLUSTER_EXTRA)
            admin.acl_log_reset()
    hosts = ",".join(f"127.0.0.1:{node.port}" for node in cluster.live_nodes())
    url = f"redis+cluster://mtc:{password}@{hosts}"
    kit = make_kit(url, url)
    queues = spread_queues(cluster, kit)
    names = [f"acl-{q}" for q in queues]
    for name, queue in zip(names, queues):
        kit.enqueue("record", name, queue=queue)
    flaky = kit.task("flaky").apply_async((kit.key("flaky"),), queue=queues[1])
    kit.worker("-Q", ",".join(queues), "--pool", "thread", "-c", "2")
    kit.wait_all_done(names)
    assert flaky.get(timeout=DEADLINE) == "second attempt"
    kit.wait_for_worker()
    assert password not in kit.log_text()
    for node in cluster.live_nodes():
        with node.client() as admin:
            denied = [e for e in admin.acl_log() if e.get("username") == "mtc"
                      and e.get("object") != "client|setinfo"]
        assert denied == [], f"node {node.port} refused: {denied}"


def test_worker_goes_on_when_a_primary_dies_and_the_cluster_promotes_its_replica(
        tmp_path: Path, make_kit: Callable[..., ScaleKit]) -> None:
    own = Cluster(tmp_path / "failover")
    try:
        own.start()
        kit = make_kit(own.url, own.url)
        queues = spread_queues(own, kit)
        doomed = own.owner_of_slot(slot_of(kit.app_name, queues[0]))
        replica = own.add_replica(doomed)
        kit.worker("-Q", ",".join(queues), "--pool", "thread", "-c", "2")
        before = [f"a{i}" for i in range(45)]
        for index, name in enumerate(before):
            kit.enqueue("slow", name, 0.05, queue=queues[index % 3])
        wait_until(lambda: kit.done_count(before) >= 5, timeout=DEADLINE,
                   message="the worker to get going")
        wait_until(lambda: SentinelGroup.replica_in_sync(doomed, replica), timeout=DEADLINE,
                   interval=0.01, message="the replica to catch up")
        done_at_kill = kit.done_count(before)
        doomed.stop()  # SIGKILL
        killed_at = time.monotonic()

        after = [f"b{i}" for i in range(15)]
        for index, name in enumerate(after):
            kit.enqueue("slow", name, 0.01, queue=queues[index % 3])
        first_enqueue_after = time.monotonic() - killed_at
        kit.wait_all_done(before + after)
        recovered = time.monotonic() - killed_at
        assert own.owner_of_slot(slot_of(kit.app_name, queues[0]),
                                 via=own.live_nodes()[0]) is replica
        done = kit.marks_of("done", before + after)
        duplicates = sorted(name for name, marks in done.items() if len(marks) > 1)
        crossed = len(before) - done_at_kill
        print(f"cluster failover: {crossed} task(s) queued or running crossed it; first "
              f"enqueue acknowledged {first_enqueue_after:.2f} s after the kill, all "
              f"{len(before) + len(after)} done {recovered:.2f} s after it; lost: 0; "
              f"run twice: {len(duplicates)} {duplicates}")
        assert crossed > 0
        kit.wait_drained(queues)
    finally:
        own.stop()
