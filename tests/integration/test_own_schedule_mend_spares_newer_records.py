"""A worker mends its app's own unreadable schedule record, but never one a newer
minitask wrote, and says nothing wrong when another worker mended it first (issue 29,
review of the mending of probe 29g's low).

During a rolling deploy the workers of the older minitask found the newer one's
record (record version 2) unreadable and wrote their own definition over it; two
workers mending at once, the second found its write unneeded (the same record) and
said the record could not be read. A real redis-server; a real worker process for the
first, the worker's own TickSource on it for the second (the race made exact).
"""
from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.worker.leases import Holdings
from minitask.worker.stop import Stop
from minitask.worker.ticks import TickSource
from tests.support.planted_schedules import DEADLINE, planted_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T = QueueKeys("planted", "timed")


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    yield start_redis()


def test_a_newer_minitasks_record_is_not_written_over(
        server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    with planted_worker(server, processes, tmp_path, request) as served:
        client = served.client
        record = client.hget(T.schedules, "often") or b""
        head, _, body = record.partition(b"\n")
        assert b'"v":1' in head
        newer = head.replace(b'"v":1', b'"v":2') + b"\n" + body
        client.hset(T.schedules, "often", newer)
        client.rpush(T.wake, "1")  # (an idle worker reads its schedules at once)
        wait_until(lambda: "record version 2" in served.log.read_text(errors="replace"),
                   timeout=DEADLINE, message="the worker to read the newer record")
        client.rpush(T.wake, "1")  # and once more, for good measure
        wait_until(lambda: client.llen(T.wake) == 0, timeout=DEADLINE,
                   message="the worker to take its wake token")
        assert client.hget(T.schedules, "often") == newer
        text = served.log.read_text(errors="replace")
        assert "written again from the app's code" not in text, text[-3000:]


def test_a_record_another_worker_mended_meanwhile_is_not_said_unreadable(
        server: RedisServer, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    client = server.client()
    app = Minitask("planted", broker=server.client())

    @app.periodic(every=60.0, queue="timed", name="often")
    def often() -> None:
        pass

    schedules = list(app.periodic_schedules.values())
    store = app.broker.schedules
    now_ms = app.clock.now_ms()
    store.save(schedules[0], schedules[0].next_after(now_ms))
    client.hset(T.schedules, "often", b"\xc1 damaged")
    read = store.armed

    def read_then_mended_elsewhere(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        client.hset(T.schedules, "often", schedules[0].record())  # the other worker
        return found

    monkeypatch.setattr(store, "armed", read_then_mended_elsewhere)
    ticks = TickSource(app, SimpleNamespace(queues=["timed"]),  # type: ignore[arg-type]
                       Holdings(), Stop(), schedules)
    with caplog.at_level(logging.WARNING, logger="minitask.worker.ticks"):
        ticks._read(now_ms)
    said = [record.getMessage() for record in caplog.records]
    assert not any("cannot be read" in line for line in said), said
    monkeypatch.setattr(store, "armed", read)
    ticks._read(now_ms)  # read again: it is armed, to fire
    assert ticks.earliest_tick() is not None
    app.close()
