"""Data minitask did not write in the worker registry, worker records, orders lists and
schedule records, on a real redis-server (issue 29): what ``minitask status``,
``minitask schedules`` and ``minitask shutdown`` say is true, bounded, and names
the key at fault; a real worker keeps serving and takes none of it for an outage."""
from __future__ import annotations

import contextlib
import io
import json
import signal
import time
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest
import redis

from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli.main import main
from minitask.stores.registry import SHOWN_WORKERS
from tests.support.listed_workers import listed_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

APP = "tests.apps.foreign"
REGISTRY = AppKeys("foreign")
DEADLINE = 60.0


@pytest.fixture
def broker(redis_server: RedisServer, admin: "redis.Redis[bytes]",
           monkeypatch: pytest.MonkeyPatch) -> Iterator["redis.Redis[bytes]"]:
    """The suite's redis-server, empty, as the CLI's app (tests.apps.foreign) sees it."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    yield admin


def cli(*argv: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def plant_worker(client: "redis.Redis[bytes]", name: str, beat_ms: int, **fields: Any) -> None:
    client.zadd(REGISTRY.workers, {name: beat_ms})
    client.hset(REGISTRY.worker(name), mapping={"beat_ms": beat_ms, "name": name, **fields})


@pytest.mark.parametrize("skew", [b"1e300", b"nan", b"inf", b"99999999999999999999999", b"1.5",
                                  b"abc", b"-999999999999999999"])
def test_a_planted_clock_skew_is_left_out_and_a_measured_one_is_kept(
        broker: "redis.Redis[bytes]", skew: bytes, caplog: pytest.LogCaptureFixture) -> None:
    now_ms = int(time.time() * 1000)
    plant_worker(broker, "planted", now_ms, clock_skew_ms=skew)
    plant_worker(broker, "measured", now_ms, clock_skew_ms=b"-5000")
    code, out, _ = cli("status", "-A", APP, "--json")
    assert code == 0
    report = json.loads(out)
    skews = {worker["name"]: worker["clock_skew_ms"] for worker in report["workers"]}
    assert skews == {"planted": None, "measured": -5000}
    assert not any("worker planted's" in warning for warning in report["warnings"])
    assert any("worker measured's clock is 5.0 s behind" in warning
               for warning in report["warnings"])
    said = [record.getMessage() for record in caplog.records if "clock_skew_ms" in
            record.getMessage()]
    assert len(said) <= 1 and all(REGISTRY.worker("planted") in line for line in said)


def test_status_lists_a_bounded_number_of_workers_the_live_ones_first_and_says_how_many_more(
        broker: "redis.Redis[bytes]", processes: Processes, redis_server: RedisServer,
        tmp_path: Path) -> None:
    planted = 20_000
    old_ms = int(time.time() * 1000) - 30_000  # live still, but silent for 30 s
    for start in range(0, planted, 5000):
        broker.zadd(REGISTRY.workers, {f"planted{i}": old_ms for i in range(start, start + 5000)})
    worker = processes.worker(APP, "-Q", "other", "--name", "real",
                              env={"MINITASK_BROKER_URL": redis_server.url},
                              log=tmp_path / "worker.log")
    wait_until(lambda: any(broker.hget(REGISTRY.worker(member.decode()), "name") == b"real"
                           for member in broker.zrevrange(REGISTRY.workers, 0, 0)),
               timeout=DEADLINE, message="the real worker's heartbeat")
    broker.config_resetstat()
    code, out, _ = cli("status", "-A", APP)
    assert code == 0
    assert "real" in out  # the one that beats is listed, ahead of the silent ones
    # every planted member is left out: 499 were read and hold no record, the rest
    # were not read (the figure counted only those, 19,501)
    assert f"... and {planted} more in the worker registry, not shown" in out, out
    # the work is bounded: the records of at most SHOWN_WORKERS workers were read
    calls = broker.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0)
    assert calls <= SHOWN_WORKERS + 10, calls
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0


def test_schedules_lists_records_it_cannot_read_naming_key_field_and_problem(
        broker: "redis.Redis[bytes]") -> None:
    timed = queue_keys("foreign", "timed")
    broker.sadd(REGISTRY.queues, "timed")
    broker.hset(timed.schedules, "garbled", b"\x00not a record")
    broker.hset(timed.schedules, b"\xff\xfe", b"{}")
    code, out, _ = cli("schedules", "-A", APP)
    assert code == 0
    assert (f"unreadable schedule record: field 'garbled' of key {timed.schedules}: "
            f"cannot decode a schedule record") in out, out
    assert f"field '\\xff\\xfe' of key {timed.schedules}: is not UTF-8" in out, out
    code, out, _ = cli("schedules", "-A", APP, "--json")
    unreadable = json.loads(out)["unreadable"]
    assert {(entry["key"], entry["field"]) for entry in unreadable} == {
        (timed.schedules, "garbled"), (timed.schedules, "\\xff\\xfe")}
    broker.delete(timed.schedules)
    broker.set(timed.schedules, b"a string")  # the whole key of another type
    code, out, _ = cli("schedules", "-A", APP)
    assert code == 0 and f"key {timed.schedules}: it holds another type" in out, out


def test_an_orders_list_of_another_type_is_set_aside_by_the_worker_and_is_no_outage(
        broker: "redis.Redis[bytes]", processes: Processes, redis_server: RedisServer,
        tmp_path: Path) -> None:
    """The listener meets it at its next wait (within 5 s) and moves it aside whole, said
    once, as data: left, ``minitask shutdown`` could never reach the worker again."""
    log = tmp_path / "worker.log"
    worker, worker_id = listed_worker(processes, broker, APP, "foreign", "ordered",
                                      redis_server.url, log, DEADLINE)
    orders = REGISTRY.control(worker_id)
    broker.set(orders, b"not a list")
    wait_until(lambda: broker.get(f"{orders}:foreign") == b"not a list", timeout=DEADLINE,
               message="the worker set its orders list aside")
    code, out, err = cli("shutdown", "-A", APP, "ordered")
    assert code == 0, err
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text()
    assert text.count(f"key {orders}:") == 1, text
    assert f"moved aside to {orders}:foreign" in text, text
    assert "Redis refused" not in text and "Redis is back" not in text, text
    assert "lost Redis" not in text, text
