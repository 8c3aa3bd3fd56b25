"""A ``fired``, ``schedules`` or ``ticks`` key of another type stops no schedule for
good (issue 29 §1, probe29r L4): each stopped every schedule of its queue until someone
fixed it by hand, re-said at each 5 s re-read. Now the key is moved aside whole to
``<key>:foreign`` (kept, as it was), said once naming it, and the app's schedules are
written again and armed, so every one of them runs on with no restart. A real worker
process of tests/apps/periodic.py on the suite's redis-server, two schedules in the
queue; the runs are counted from the marks they leave."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0
KEYS = queue_keys("periodic", "default")
SCHEDULES = [{"name": "often", "task": "beat", "every": 1.0},
             {"name": "also", "task": "beat", "every": 1.0}]


def plant_list(admin: Any, key: str) -> None:
    admin.delete(key)
    admin.rpush(key, "someone's")


@pytest.mark.parametrize("key", [KEYS.fired, KEYS.schedules, KEYS.ticks])
def test_a_schedule_key_of_another_type_is_moved_aside_and_the_schedules_run_on(
        key: str, redis_server: RedisServer, admin: Any, processes: Processes,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker(
        "tests.apps.periodic", env={"MINITASK_BROKER_URL": redis_server.url,
                                    "TEST_PERIODIC": json.dumps(SCHEDULES)},
        log=log)

    def runs() -> int:
        return int(admin.llen("marks:run:often")) + int(admin.llen("marks:run:also"))

    def until(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + DEADLINE
        while not done():
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
            time.sleep(0.1)

    try:
        until(lambda: runs() >= 2 and admin.type(KEYS.fired) == b"hash")
        plant_list(admin, key)
        planted_at = runs()
        # both schedules run again (each fires once a second): four runs more
        until(lambda: runs() >= planted_at + 4)
        until(lambda: admin.type(key) == {KEYS.ticks: b"zset"}.get(key, b"hash"))
    finally:
        stop_worker(worker, log)
    assert admin.lrange(key + ":foreign", 0, -1) == [b"someone's"]  # kept, whole
    assert set(admin.hkeys(KEYS.schedules)) == {b"often", b"also"}
    assert set(admin.zrange(KEYS.ticks, 0, -1)) == {b"often", b"also"}
    text = log.read_text(errors="replace")
    said = [line for line in text.splitlines() if key in line]
    assert len(said) == 1, said
    assert f"moved aside to {key}:foreign" in said[0], said
    assert "Traceback" not in text
