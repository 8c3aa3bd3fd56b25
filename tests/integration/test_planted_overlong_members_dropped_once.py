"""Members longer than any id minitask writes, planted in a queue's keys, are dropped by
the first fetch that meets them, before any other use (issue 29, probe 29d's M3).

A 50 MB element of a ready list, or member of ``delayed`` or ``leases`` (due, expired,
or dated ahead: read by every fetch's look at the next event), made each fetch block
Redis 1.7 to 4 s, for as long as it stayed: promotion pushed it whole into a ready
list, a fetch built key names and read hashes with it. Now each is measured as it is
read (``#id`` against wire.message.MAX_ID_BYTES, or a group token's bound for a ready
list) and removed there, once; the worker says so in one log line naming the key and
the length, never the content, and keeps running its tasks.

A real redis-server, a real worker process of tests.apps.foreign (thread pool), plants
of 5 MB (what a 50 MB one does, quicker).
"""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from minitask.broker.keys import queue_keys
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
OTHER = queue_keys("foreign", "other")
READY = next(key for key in OTHER.ready if key.endswith(":ready:5"))
SIZE = 5 << 20
#: The longest worker log line allowed: far below the plants' 5 MB.
LINE_MOST = 20_000


def plants() -> List[Tuple[str, bytes, Any]]:
    """(key, member, how to plant it): each a different 5 MB member."""
    now_ms = int(time.time() * 1000)
    return [
        (READY, b"r" * SIZE, "list"),
        (OTHER.delayed, b"d" * SIZE, 10),  # due long ago: promoted by the first fetch
        (OTHER.delayed, b"f" * SIZE, 10 ** 15),  # ahead: the first delayed, read each fetch
        (OTHER.leases, b"e" * SIZE, 10),  # expired: reclaimed by the first fetch
        (OTHER.leases, b"l" * SIZE, (now_ms + 600_000) * 10),  # held: the next event's look
    ]


def held(admin: Any, key: str, member: bytes, kind: Any) -> bool:
    if kind == "list":
        return any(len(entry) == len(member) for entry in admin.lrange(key, 0, -1))
    return admin.zscore(key, member) is not None


def test_a_worker_drops_overlong_members_once_and_keeps_running(
        redis_server: Any, admin: Any, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    planted = plants()
    for key, member, kind in planted:
        if kind == "list":
            admin.rpush(key, member)
            admin.zadd(OTHER.cancelled, {member: 5})  # a cancelled mark planted with it
        else:
            admin.zadd(key, {member: kind})
    env = {"MINITASK_BROKER_URL": redis_server.url}
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.foreign", "--pool", "thread", "-c", "2", "-Q",
                              "other,timed", env=env, log=log)
    from tests.apps.foreign import build
    app = build(redis_server.url)
    try:
        for _ in range(2):  # the second after the first has run: fetches between
            sound = uuid.uuid4().hex
            app.tasks["mark"].delay(sound)
            wait_until(lambda: sound.encode() in admin.lrange("marks:other", 0, -1),
                       timeout=DEADLINE, message="a sound task runs beside the plants")
        wait_until(lambda: not any(held(admin, *plant) for plant in planted),
                   timeout=DEADLINE, message="every planted member removed")
        assert admin.zcard(OTHER.cancelled) == 0  # its planted mark gone with it
        assert admin.zcard(OTHER.dead) == 0  # dropped, never dead-lettered (a 5 MB key)
        wait_until(lambda: log.read_text(errors="replace").count(f"{SIZE:,} bytes") >= 3,
                   timeout=DEADLINE, message="the drops said")
        text = log.read_text(errors="replace")
        said: Dict[str, int] = {}
        for line in text.splitlines():
            assert len(line) < LINE_MOST
            if f"{SIZE:,} bytes" in line:
                for key in (READY, OTHER.delayed, OTHER.leases):
                    if f"key {key}:" in line:
                        said[key] = said.get(key, 0) + 1
        assert said.get(READY, 0) >= 1 and said.get(OTHER.delayed, 0) >= 1, text[-3000:]
        assert said.get(OTHER.leases, 0) >= 1, text[-3000:]
        assert "r" * 1000 not in text and "d" * 1000 not in text  # never the content
        # nothing of them is left to read again: the fetches after cost what any does
        admin.config_resetstat()
        sound = uuid.uuid4().hex
        app.tasks["mark"].delay(sound)
        wait_until(lambda: sound.encode() in admin.lrange("marks:other", 0, -1),
                   timeout=DEADLINE, message="a task after the drops")
        assert int(admin.info("memory")["used_memory"]) < 3 * SIZE  # the plants freed
        worker.send_signal(signal.SIGTERM)
        assert exit_code(worker) == 0
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
