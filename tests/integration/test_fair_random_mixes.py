"""Fair queues: random mixes of sends (plain, with a priority, with an expiry, one by
one and in batches), cancels, pauses, resumes, purges and fetches over six groups keep
the queue's ready count exact after every step, never hand out a paused group's task,
hand out each task once, and, once every group is resumed, drain every task left and
leave no group key behind (solo groups in ``groups_solo`` and in their turns, groups
in their set form, and the moves between them). Seeded; the tasks' ids are random, so
a failure prints the operations that led to it. Each seed runs on fakeredis and on the
suite's own redis-server.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, Set, Tuple

import pytest

from minitask import Minitask
from minitask.admin import pause_group, purge_ready, queue_counts, resume_group
from tests.support.clock import ManualClock
from tests.support.fair import fetch, tenant_app

STEPS = 60
GROUPS = "ABCDEF"


@pytest.mark.parametrize("seed", range(12))
def test_a_random_mix_keeps_every_count_and_task(
        make_app: Callable[..., Minitask], clock: ManualClock, seed: int) -> None:
    rng = random.Random(seed)
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    pending: Dict[str, Tuple[str, int]] = {}  # id -> (group, n), in sending order
    handles: Dict[str, Any] = {}
    paused: Set[str] = set()
    ops: List[Any] = []
    n = 0
    for step in range(STEPS):
        op, group = rng.random(), rng.choice(GROUPS)
        if op < 0.35:
            n += 1
            options: Dict[str, int] = {}
            if rng.random() < 0.2:
                options["priority"] = rng.randint(0, 9)
            if rng.random() < 0.15:
                options["expires"] = 3600
            handle = job.apply_async((group, n), **options)
            pending[handle.id], handles[handle.id] = (group, n), handle
            ops.append(("send", group, n, options))
        elif op < 0.45:
            many = [(rng.choice(GROUPS), n + i + 1) for i in range(rng.randint(1, 4))]
            n += len(many)
            for handle, args in zip(job.delay_many(many), many):
                pending[handle.id], handles[handle.id] = args, handle
            ops.append(("send many", many))
        elif op < 0.55 and pending:
            chosen = rng.choice(list(pending))
            done = handles[chosen].cancel()
            ops.append(("cancel", pending[chosen], done))
            if done:
                del pending[chosen]
        elif op < 0.62:
            if group in paused:
                resume_group(app, "default", group)
                paused.discard(group)
            else:
                pause_group(app, "default", group)
                paused.add(group)
            ops.append(("resume" if group not in paused else "pause", group))
        elif op < 0.64 and not paused:
            purge_ready(app, "default")
            pending.clear()
            ops.append(("purge",))
        else:
            got = fetch(app, clock, rng.choice([1, 3, 10]))
            taken = [(d.task_id, tuple(d.message().args)) for d in got.deliveries]
            ops.append(("fetch", [args for _, args in taken]))
            for task_id, args in taken:
                assert task_id in pending, (step, args, "handed out twice or unknown", ops)
                assert args[0] not in paused, (step, args, "of a paused group", ops)
                del pending[task_id]
        ready = queue_counts(app, "default")["ready"]
        assert ready == len(pending), (step, ready, sorted(pending.values()), ops)
    for group in sorted(paused):
        resume_group(app, "default", group)
    for _ in range(100):
        if not pending:
            break
        for delivery in fetch(app, clock, 10).deliveries:
            assert delivery.task_id in pending, (delivery.message().args, ops)
            del pending[delivery.task_id]
    assert not pending, (sorted(pending.values()), ops)
    left = [key for key in client.keys("*")
            if (b":g:" in key and not key.endswith(b":running")) or key.endswith(
                (b"groups_solo", b"flow:groups", b"groups_ready"))]
    assert left == [], (left, ops)
