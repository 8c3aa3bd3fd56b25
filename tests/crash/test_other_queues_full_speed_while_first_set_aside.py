"""While the first queue of a worker is set aside (Redis refuses its fetch: the fetch
script's own runtime error, tests/apps/refusing.py), the others are fetched at full
speed: a real worker on a real redis-server drains a queue behind a refused one with
about as many script calls per task as when it serves that queue alone (the fetch
rides behind each outcome).

Before (review 11, F5), nothing was fetched behind outcomes while the first queue was
set aside: each outcome went alone and each fetch in a round trip of its own, two
script calls per task instead of one.
"""
from __future__ import annotations

import pytest

from tests.support.crash_kit import DEADLINE, Kit

pytestmark = pytest.mark.crash

TASKS = 300


def script_calls_per_task(kit: Kit, queues: str, refused: str = "") -> float:
    """Drain TASKS tasks of 'busy' with a burst worker serving ``queues``, Redis refusing
    every fetch of queue ``refused``."""
    with kit.tasks.app.batch():
        for i in range(TASKS):
            kit.tasks.record.apply_async((f"t{i}",), queue="busy")
    kit.client.config_resetstat()
    flag = kit.logs / "refuse"
    flag.touch()
    worker = kit.worker("--pool", "thread", "-c", "1", "--burst", "-Q", queues,
                        app="tests.apps.refusing", TEST_REFUSED_QUEUE=refused,
                        TEST_REFUSED_WHILE=str(flag))
    assert worker.wait(timeout=DEADLINE * 3) == 0
    stats = kit.client.info("commandstats")
    calls = sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_evalsha"))
    return float(calls) / TASKS


def test_the_other_queues_are_fetched_behind_outcomes(kit: Kit) -> None:
    alone = script_calls_per_task(kit, "busy")
    kit.tasks.record.apply_async(("waits",), queue="stuck")  # (never fetched)
    behind = script_calls_per_task(kit, "stuck,busy", refused="stuck")
    print("script calls per task: alone %.2f, behind a refused queue %.2f" % (alone, behind))
    assert behind <= alone * 1.25, (alone, behind)
