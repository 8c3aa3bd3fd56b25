"""A queue's ``cancels`` stream holding data minitask did not write, under real worker
processes on a real redis-server (issue 29): ``cancel(running=True)`` still stops the
task, or says which key is in the way; the worker's watch keeps working, and data in
the key is never taken for a Redis outage."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from minitask import BrokerError, TaskFailed
from minitask.broker.keys import queue_keys
from tests.support.aio_workers import aio_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
#: The last stream entry id there is: no XADD can add an entry after it.
LAST_ID = "18446744073709551615-18446744073709551615"
KEYS = queue_keys("aio", "default")


def stop_a_long_task(client: Any, nap: Any, key: str, pool: str, log: Path) -> None:
    """Send a 30 s task, cancel it once it runs: the worker must hear it, and (but on
    the thread pool, which only sets ``cancel_requested``) it ends cancelled."""
    handle = nap.delay(key, 30.0)
    wait_until(lambda: client.llen(f"marks:started:{key}") == 1, timeout=DEADLINE,
               message=f"task {key} started")
    assert handle.cancel(running=True) is True
    wait_until(lambda: f"task {handle.id}: stop requested" in log.read_text(), timeout=15,
               message="the worker heard the request")
    if pool != "thread":
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=15)  # it would run its whole 30 s if the watch heard nothing
        assert failed.value.exc_type == "Cancelled"


def stop(worker: Any, pool: str) -> None:
    """Stop the worker as SIGTERM does (a thread pool's tasks run on: it is killed)."""
    if pool == "thread":
        worker.kill()
        worker.wait(timeout=DEADLINE)
    else:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_an_entry_with_the_last_id_there_is_is_set_aside_and_cancel_still_stops_the_task(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    client = server.client()
    client.xadd(KEYS.cancels, {b"planted": b"1"}, id=LAST_ID)  # before the worker starts
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, pool, log, slots=4)
    stop_a_long_task(client, nap, "first", pool, log)
    assert client.xrange(KEYS.cancels_aside)[0][0] == LAST_ID.encode()  # kept, aside
    # planted again while the worker watches: an operator deleted the one set aside
    client.delete(KEYS.cancels_aside)
    client.xadd(KEYS.cancels, {b"planted": b"2"}, id=LAST_ID)
    stop_a_long_task(client, nap, "second", pool, log)
    # planted again while one set aside is kept: a clear refusal naming both keys
    client.xadd(KEYS.cancels, {b"planted": b"3"}, id=LAST_ID)
    handle = nap.delay("third", 30.0)
    wait_until(lambda: client.llen("marks:started:third") == 1, timeout=DEADLINE,
               message="task third started")
    with pytest.raises(BrokerError, match="cancels_aside") as refused:
        handle.cancel(running=True)
    assert KEYS.cancels in str(refused.value)
    assert client.xrange(KEYS.cancels)[-1][0] == LAST_ID.encode()  # nothing changed
    client.delete(KEYS.cancels_aside)  # inspected: then the next request goes through
    assert handle.cancel(running=True) is True
    wait_until(lambda: f"task {handle.id}: stop requested" in log.read_text(), timeout=15,
               message="the worker heard the request")
    stop(worker, pool)
    text = log.read_text()
    assert "Redis refused" not in text and "Redis is back" not in text, text
    assert f"{KEYS.cancels}: it held an entry whose id is past" in text, text


@pytest.mark.parametrize("pool", ["process", "asyncio"])
def test_a_stream_whose_last_id_an_entry_deleted_since_took_is_set_aside_by_the_request(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    """The entry with the last id there is was deleted (XDEL): the stream reads empty,
    so neither the watch nor request_cancel.lua sees a planted entry, yet it refuses
    every XADD. The request's XADD is refused ('last possible ID'), and the script sets
    the stream aside and posts to a new one (its pcall branch): the worker hears it."""
    client = server.client()
    client.xadd(KEYS.cancels, {b"planted": b"1"}, id=LAST_ID)
    client.xdel(KEYS.cancels, LAST_ID)
    assert client.xlen(KEYS.cancels) == 0 and client.exists(KEYS.cancels) == 1
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, pool, log, slots=4)
    stop_a_long_task(client, nap, "first", pool, log)
    aside = client.xinfo_stream(KEYS.cancels_aside)
    assert aside["length"] == 0 and aside["last-generated-id"] == LAST_ID.encode()
    posted = client.xrange(KEYS.cancels)
    assert posted and int(posted[0][0].split(b"-")[0]) < 253_402_300_800_000
    stop_a_long_task(client, nap, "second", pool, log)  # the new stream serves on
    stop(worker, pool)
    text = log.read_text()
    assert "Redis refused" not in text and "Redis is back" not in text, text


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_cancels_key_of_another_type_is_said_once_as_data_and_watched_again_once_fixed(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    client = server.client()
    log = tmp_path / "worker.log"
    worker = aio_worker(processes, server, pool, log, slots=4)
    assert nap.delay("warm", 0.0).get(timeout=DEADLINE) == "warm"  # the watch is up
    client.set(KEYS.cancels, b"not a stream")  # under the watching worker
    wait_until(lambda: "holds another type" in log.read_text(), timeout=DEADLINE,
               message="the worker said the key holds another type")
    handle = nap.delay("held", 30.0)
    wait_until(lambda: client.llen("marks:started:held") == 1, timeout=DEADLINE,
               message="task held started")
    with pytest.raises(BrokerError, match=f"key {KEYS.cancels} holds another type"):
        handle.cancel(running=True)
    assert client.get(KEYS.cancels) == b"not a stream"  # left as it was
    assert nap.delay("served", 0.0).get(timeout=DEADLINE) == "served"  # still serving
    client.delete(KEYS.cancels)  # fixed: the watch takes the queue back within seconds
    deadline = time.monotonic() + 20
    while (f"task {handle.id}: stop requested" not in log.read_text()
           and time.monotonic() < deadline):
        handle.cancel(running=True)
        time.sleep(0.5)
    assert f"task {handle.id}: stop requested" in log.read_text()
    stop(worker, pool)
    text = log.read_text()
    assert "Redis refused" not in text and "Redis is back" not in text, text
    # once per process that watches (each of a process pool's 4 children watches)
    said = text.count(f"key {KEYS.cancels}: it holds another type")
    assert 1 <= said <= (4 if pool == "process" else 1), text
