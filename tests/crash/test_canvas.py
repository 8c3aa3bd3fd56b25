"""Chords under fire: worker processes SIGKILLed again and again while chords run.

Every body must run, with the right results, and be sent exactly once: its runs
all carry one task id, and no two of them share a delivery number (a second
sending would start again at delivery 1; a body whose own worker was killed
runs again at delivery 2, which at-least-once allows and the test tells apart).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from minitask import chord, group
from tests.apps.canvas import producer
from tests.support.processes import Processes, kill_group
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

CHORDS = 50
MEMBERS = 20
WORKERS = 3
WORKER_ARGS = ("--pool", "process", "-c", "2")
#: Kill a worker (and its children) each time this many member runs have finished.
KILL_EVERY = 120
DEADLINE = 240.0


@pytest.mark.timeout(600)
def test_sigkilled_workers_never_lose_a_chord_body_nor_send_one_twice(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    server = start_redis()
    client = server.client()
    env = {"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": "2"}
    logs: List[Path] = []

    def start_worker() -> object:
        logs.append(tmp_path / f"worker-{len(logs)}.log")
        return processes.worker("tests.apps.canvas", *WORKER_ARGS, env=env, log=logs[-1])

    app = producer(server.client())
    member = app.tasks["canvas.member"]
    total = app.tasks["canvas.total"]
    try:
        handles = [chord(group(member.s(f"c{c}-m{m}", m, pause=0.05, mark=True)
                               for m in range(MEMBERS)), total.s(tag=f"c{c}")).delay()
                   for c in range(CHORDS)]
        workers = [start_worker() for _ in range(WORKERS)]
        kills = 0
        rng = random.Random(14)
        while int(client.llen("marks:member")) < CHORDS * MEMBERS:
            threshold = (kills + 1) * KILL_EVERY
            wait_until(lambda: int(client.llen("marks:member")) >= threshold
                       or all(client.llen(f"marks:body:c{c}") for c in range(CHORDS)),
                       timeout=DEADLINE, message=f"{threshold} member runs")
            if int(client.llen("marks:member")) < threshold:
                break  # every body ran already
            victim = rng.randrange(WORKERS)
            kill_group(workers[victim])  # type: ignore[arg-type]
            workers[victim] = start_worker()
            kills += 1
        results = [handle.get(timeout=DEADLINE) for handle in handles]
        assert results == [sum(range(MEMBERS))] * CHORDS
        assert kills >= 3, "the kills were meant to land while the chords ran"
        runs: Dict[str, List[List[str]]] = {
            f"c{c}": [raw.decode().split(":") for raw in client.lrange(f"marks:body:c{c}", 0, -1)]
            for c in range(CHORDS)}
        for tag, body_runs in runs.items():
            assert body_runs, f"the body of chord {tag} never ran"
            assert len({run[0] for run in body_runs}) == 1, f"chord {tag}: {body_runs}"
            deliveries = [run[2] for run in body_runs]
            assert len(set(deliveries)) == len(deliveries), f"chord {tag} sent twice: {body_runs}"
        member_marks = [raw.decode().split(":") for raw in client.lrange("marks:member", 0, -1)]
        redelivered = sum(int(mark[3]) > 1 for mark in member_marks)
        assert redelivered, "no member was running when its worker was killed"
        member_runs = len(member_marks)
        print(f"{kills} kills; {member_runs} member runs for {CHORDS * MEMBERS} members; "
              f"{redelivered} after a kill; {sum(len(r) > 1 for r in runs.values())} bodies ran "
              f"again after a kill")
    except BaseException:
        for log in logs:
            if log.exists():
                print(f"----- {log}\n" + log.read_text(errors="replace")[-3000:])
        raise
    finally:
        app.close()
        client.close()
