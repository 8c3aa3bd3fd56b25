"""Handles rebuilt in another program, and argument types, end to end: the suite's
real redis-server, real worker processes, a second real program that waits."""
from __future__ import annotations

import decimal
import subprocess
import uuid
from pathlib import Path
from typing import Dict, Iterator

import pytest
import redis

from minitask import Minitask, chain, group
from tests.apps.typed import Color, Money, build
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 120.0
APP = "tests.apps.typed"


@pytest.fixture
def producer(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = build(redis_server.client())
    try:
        yield made
    finally:
        made.close()


def _env(redis_server: RedisServer) -> Dict[str, str]:
    return {"MINITASK_BROKER_URL": redis_server.url}


def _reader(processes: Processes, redis_server: RedisServer, kind: str, some_id: str,
            out: Path) -> "subprocess.Popen[bytes]":
    """Start the second program; return once it is about to wait."""
    process = processes.start("-m", APP, kind, some_id, str(out), env=_env(redis_server),
                              log=out.with_suffix(".log"))
    wait_until(lambda: Path(str(out) + ".waiting").exists() or out.exists(), DEADLINE,
               message="the second program to start waiting")
    return process


def test_a_chains_last_step_rebuilt_in_another_program_waits_until_it_is_sent(
        producer: Minitask, redis_server: RedisServer, processes: Processes,
        tmp_path: Path) -> None:
    add = producer.tasks["typed.add"]
    last = chain(add.s(1, 1), add.s(10), add.s(100)).delay()
    out = tmp_path / "last.txt"
    reader = _reader(processes, redis_server, "handle", last.id, out)
    # no worker yet: the step is not sent, and the other program waits for it
    assert not out.exists(), out.read_text()
    assert producer.handle(last.id).status() == "unknown"
    processes.worker(APP, "--pool", "process", "-c", "2", env=_env(redis_server),
                     log=tmp_path / "worker.log")
    wait_until(out.exists, DEADLINE, message="the second program's result")
    assert out.read_text() == "112"
    assert exit_code(reader) == 0


def test_a_group_handle_rebuilt_in_another_program_gets_every_member(
        producer: Minitask, redis_server: RedisServer, processes: Processes,
        tmp_path: Path) -> None:
    add = producer.tasks["typed.add"]
    sent = group(add.s(1, 1), chain(add.s(2, 2), add.s(3)), group(add.s(5, 5))).delay()
    out = tmp_path / "group.txt"
    reader = _reader(processes, redis_server, "group", sent.id, out)
    assert not out.exists(), out.read_text()
    processes.worker(APP, "--pool", "thread", "-c", "2", env=_env(redis_server),
                     log=tmp_path / "worker.log")
    wait_until(out.exists, DEADLINE, message="the second program's result")
    assert out.read_text() == "[2, 7, [10]]"
    assert exit_code(reader) == 0
    assert producer.group_handle(sent.id).status() == {"succeeded": 3}


@pytest.mark.parametrize("pool", ["process", "thread", "asyncio"])
def test_uuid_decimal_and_registered_types_go_through_a_real_worker(
        producer: Minitask, redis_server: RedisServer, processes: Processes,
        tmp_path: Path, pool: str) -> None:
    processes.worker(APP, "--pool", pool, "-c", "2", env=_env(redis_server),
                     log=tmp_path / "worker.log")
    values = [uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"), decimal.Decimal("-0.10"),
              Color.BLUE, {"price": Money(decimal.Decimal("9.99"), "EUR")}]
    described = producer.tasks["typed.describe"].delay(*values)
    doubled = chain(producer.tasks["typed.double"].s(Money(decimal.Decimal("1.25"), "EUR")),
                    producer.tasks["typed.double"].s()).delay()
    assert described.get(timeout=DEADLINE) == [
        ["UUID", values[0]], ["Decimal", values[1]], ["Color", Color.BLUE], ["dict", values[3]]]
    assert doubled.get(timeout=DEADLINE) == Money(decimal.Decimal("5.00"), "EUR")
