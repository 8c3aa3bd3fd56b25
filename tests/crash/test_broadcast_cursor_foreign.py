"""A broadcast subscriber cursor planted above its place in the index (which
minitask writes with it) loses no call, however many subscribers the queue has:
the subscriber's own pull sets it back to its place. Before, a send checked only
the 16 subscribers with the least places: a cursor planted at seq+1 of one ranked
past them took the calls up to it for pulled ones (never run there), and
``join()`` said they were dropped over broadcast_maxlen or broadcast_ttl. And in
normal operation (several subscribers, sends while pulling, trimming over
broadcast_maxlen, workers restarted by SIGTERM and SIGKILL) no cursor is ever set
back and no call runs twice. Real worker processes, on a real redis-server."""
from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps import broadcast as bcast_app
from tests.apps.foreign import build
from tests.support.processes import Processes, exit_code, kill_group, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 30.0
NEWS = queue_keys("foreign", "news")
FAN = queue_keys("bcast", bcast_app.QUEUE)
SET_BACK = "set back to"


def _said(log: Path) -> List[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if SET_BACK in line]


@pytest.mark.parametrize("ahead", [1, 2, 3, 7])
def test_a_cursor_planted_on_a_subscriber_past_the_16_least(
        processes: Processes, server: RedisServer, ahead: int, tmp_path: Path) -> None:
    """20 subscribers that never pull rank before "real" (same place, names sorted
    first): no send checks real's cursor; its pull does."""
    client: "redis.Redis[bytes]" = server.client()
    producer = build(server.url)
    log = tmp_path / "real.log"
    try:
        processes.worker("tests.apps.foreign", "-Q", "news", "--pool", "thread", "-c", "1",
                         "--name", "real", env={"MINITASK_BROKER_URL": server.url}, log=log)
        wait_until(lambda: client.hexists(NEWS.broadcast("cursors"), "real"),
                   timeout=DEADLINE, message="real subscribed")
        hear = producer.tasks["hear"]
        assert hear.delay(0).join(timeout=DEADLINE) == {"real": 0}
        now = int(time.time() * 1000)
        for i in range(20):
            producer.broker.broadcasts.subscribe("news", f"idle{i:02d}", now)
        places = client.zrange(NEWS.broadcast("places"), 0, -1)
        assert places.index(b"real") >= 16, places
        seq = int(client.hget(NEWS.broadcast("state"), "seq") or 0)
        client.hset(NEWS.broadcast("cursors"), "real", seq + ahead)
        calls = [hear.delay(n) for n in range(1, ahead + 3)]
        for n, call in enumerate(calls, start=1):
            assert call.join(timeout=DEADLINE, subscribers=["real"]) == {"real": n}
        wait_until(lambda: _said(log), timeout=DEADLINE, message="the worker said it")
        assert len(_said(log)) == 1, _said(log)
        assert "minitask:{foreign:news}:bcast:cursors" in _said(log)[0]
    finally:
        producer.close()
        client.close()


def _first_runs(client: "redis.Redis[bytes]", name: str) -> "Counter[str]":
    """How often each call ran on `name` as a first delivery (a redelivery after a
    SIGKILL is at-least-once, not a set-back)."""
    runs: "Counter[str]" = Counter()
    for entry in client.lrange(f"marks:note:{name}", 0, -1):
        n, _, _, delivery = bytes(entry).decode().split(":")
        if delivery == "1":
            runs[n] += 1
    return runs


def test_normal_operation_sets_no_cursor_back(
        processes: Processes, start_redis: Callable[..., RedisServer], tmp_path: Path) -> None:
    redis_log = tmp_path / "redis.log"
    server = start_redis("--logfile", str(redis_log))
    client: "redis.Redis[bytes]" = server.client()
    side = Minitask("bcast", broker=server.url, broadcast_maxlen=8)
    note, _ = bcast_app.register(side)
    logs: Dict[str, Path] = {}
    workers: Dict[str, object] = {}

    def start(name: str) -> None:
        logs.setdefault(name, tmp_path / f"{name}.log")
        workers[name] = processes.worker(
            "tests.apps.broadcast", "-Q", bcast_app.QUEUE, "--pool", "thread", "-c", "2",
            "--name", name, env={"MINITASK_BROKER_URL": server.url, "TEST_SUBSCRIBER": name},
            log=logs[name])
        wait_until(lambda: client.hexists(FAN.broadcast("cursors"), name),
                   timeout=DEADLINE, message=f"{name} subscribed")

    names = ["sub1", "sub2", "sub3", "sub4"]
    stop = threading.Event()
    try:
        for name in names:
            start(name)
        side.broker.broadcasts.subscribe(bcast_app.QUEUE, "idle", int(time.time() * 1000))

        def sending() -> None:
            n = 0
            while not stop.is_set() and n < 400:
                n += 1
                note.delay(n)
                time.sleep(0.02)

        sender = threading.Thread(target=sending)
        sender.start()
        for round_ in range(2):
            time.sleep(1.5)
            send(workers["sub2"], signal.SIGTERM)  # type: ignore[arg-type]
            exit_code(workers["sub2"])  # type: ignore[arg-type]
            start("sub2")
            time.sleep(1.0)
            kill_group(workers["sub3"])  # type: ignore[arg-type]
            start("sub3")
        stop.set()
        sender.join(timeout=DEADLINE)
        seq = int(client.hget(FAN.broadcast("state"), "seq") or 0)
        assert int(client.hget(FAN.broadcast("state"), "dropped") or 0) > 0  # trimmed
        for name in names:
            wait_until(lambda: int(client.hget(FAN.broadcast("cursors"), name) or 0) >= seq
                       and client.llen(f"marks:note:{name}") > 0,
                       timeout=DEADLINE, message=f"{name} pulled every call")
        time.sleep(1.0)  # the last calls pulled run
        for name in names:
            runs = _first_runs(client, name)
            assert [n for n, count in runs.items() if count > 1] == [], name
            assert _said(logs[name]) == [], _said(logs[name])
        assert _said(redis_log) == [], _said(redis_log)
    finally:
        stop.set()
        side.close()
        client.close()
