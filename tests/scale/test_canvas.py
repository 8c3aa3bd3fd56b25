"""Chords on the three-primary Redis Cluster: members on queues of three shards,
the body on a fourth queue, workers SIGKILLed while the chords run.

A member's steps cross slots (its result is recorded in the chord's state on one
shard, its ack is on another, the body is sent to a third); the test proves that
no crash between them loses a body or sends one twice.
"""
from __future__ import annotations

import random
from typing import Callable, Dict, List

import pytest

from minitask import chain, chord, group
from tests.apps.canvas import producer
from tests.support.processes import kill_group
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster, slot_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale

CHORDS = 30
MEMBERS = 20
KILLS = 3


@pytest.mark.timeout(300)
def test_chords_with_members_on_three_shards_survive_sigkilled_workers(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url, prefix="wf")
    queues = cluster.queues_on_distinct_shards(kit.app_name, 3) + ["body"]
    owners = {cluster.owner_of_slot(slot_of(kit.app_name, q)).port for q in queues[:3]}
    assert len(owners) == 3, f"queues {queues} share a primary"
    app = producer(cluster.client(), name=kit.app_name)
    member, total = app.tasks["canvas.member"], app.tasks["canvas.total"]
    env = kit.worker_env()
    args = ("-Q", ",".join(queues), "--pool", "process", "-c", "2")
    workers = [kit.processes.worker("tests.apps.canvas", *args, env=env,
                                    log=kit.logs / f"worker-{i}.log") for i in range(3)]
    kit.workers.extend(workers)
    try:
        body_tags = [f"{kit.app_name}-c{c}" for c in range(CHORDS)]
        handles = []
        for c, tag in enumerate(body_tags):
            header = group(member.s(f"{kit.app_name}:c{c}-m{m}", m, pause=0.03, mark=True)
                           .set(queue=queues[m % 3]) for m in range(MEMBERS))
            handles.append(chord(header, total.s(tag=tag).set(queue=queues[3])).delay())
        # a chain whose steps hop across the three shards, beside the chords
        hops = chain(app.tasks["canvas.add"].s(1, 1).set(queue=queues[0]),
                     app.tasks["canvas.add"].s(1).set(queue=queues[1]),
                     app.tasks["canvas.add"].s(1).set(queue=queues[2])).delay()

        def member_runs() -> int:
            return sum(1 for raw in kit.marks.lrange("marks:member", 0, -1)
                       if raw.decode().startswith(kit.app_name))

        rng = random.Random(14)
        for kill in range(KILLS):
            threshold = (kill + 1) * CHORDS * MEMBERS // (KILLS + 1)
            wait_until(lambda: member_runs() >= threshold, timeout=DEADLINE,
                       message=f"{threshold} member runs")
            victim = rng.randrange(len(workers))
            kill_group(workers[victim])
            workers[victim] = kit.processes.worker(
                "tests.apps.canvas", *args, env=env,
                log=kit.logs / f"worker-{len(kit.workers)}.log")
            kit.workers.append(workers[victim])
        assert [h.get(timeout=2 * DEADLINE) for h in handles] == [sum(range(MEMBERS))] * CHORDS
        assert hops.get(timeout=DEADLINE) == 4
        runs: Dict[str, List[List[str]]] = {
            tag: [raw.decode().split(":") for raw in kit.marks.lrange(f"marks:body:{tag}", 0, -1)]
            for tag in body_tags}
        for tag, body_runs in runs.items():
            assert len({run[0] for run in body_runs}) == 1, f"chord {tag}: {body_runs}"
            deliveries = [run[2] for run in body_runs]
            assert len(set(deliveries)) == len(deliveries), f"chord {tag} sent twice: {body_runs}"
    finally:
        app.close()
