"""``dead requeue`` with durability="replicated" and the replica stopped (probe29i M-A):
Redis requeues each letter, replicas do not confirm it in time. The DurabilityError of
the first stopped the command: "requeued 0 dead letter(s)", exit code 3, though that
letter was requeued, and ``--all`` tried none after it. Now each is counted requeued,
one note says how many replicas did not confirm, the others are requeued too, and
the exit code is success's (0): the requeue was made. The dashboard's requeue says
the same. A real primary and its replica stopped with SIGSTOP."""
from __future__ import annotations

import json
from typing import Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.cli import dead as dead_command
from minitask.dashboard.web import Dashboard
from tests.integration.test_dead_requeue_goes_on_past_a_refused_letter import (dead, plant,
                                                                               ready)
from tests.support.cli import operate_with, run
from tests.support.replicas import frozen, pair_per_test  # noqa: F401 (a fixture)
from tests.support.servers import RedisServer
from tests.support.unconfirmed import STALL
from tests.unit.test_dashboard import call
from tests.unit.test_dashboard_actions import confirm

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

NOTE = "unconfirmed by replicas: may not survive a failover"


@pytest.fixture
def operated(pair: List[RedisServer], monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    app = Minitask("deadunsure", broker=pair[0].url, durability="replicated", min_replicas=1,
                   durability_timeout=0.3)
    app.task(name="t.add")(lambda x, y: x + y)
    try:
        yield operate_with(app, monkeypatch, dead_command)
    finally:
        Minitask.close(app)  # (operate_with keeps it open for the commands)


@pytest.fixture
def client(pair: List[RedisServer]) -> Iterator["redis.Redis[bytes]"]:
    connection = redis.Redis.from_url(pair[0].url)
    yield connection
    connection.close()


def test_requeue_counts_an_unconfirmed_letter_as_requeued_and_goes_on(
        operated: Minitask, pair: List[RedisServer], client: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    for task_id in ("a5", "b5", "c5", "d5"):
        plant(client, operated, task_id, 5)
    with frozen(pair[1], STALL):
        code, text = run(capsys, "dead", "-A", "x", "requeue", "a5")
        assert (code, text) == (0, f"requeued 1 dead letter(s) (1 of them {NOTE})\n")
        assert ready(client, operated) == [b"a5"]
        code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes", "--json")
        assert code == 0, text
        assert json.loads(text) == {"requeued": 3, "unconfirmed": 3, "not_found": [],
                                    "not_requeued": []}
        assert dead(client, operated) == []
        assert ready(client, operated) == [b"a5", b"b5", b"c5", b"d5"]


def test_requeue_all_says_the_note_once(
        operated: Minitask, pair: List[RedisServer], client: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    for task_id in ("a5", "b5", "c3"):
        plant(client, operated, task_id, 5 if task_id != "c3" else 3)
    with frozen(pair[1], STALL):
        code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes")
    assert (code, text) == (0, f"requeued 3 dead letter(s) (3 of them {NOTE})\n")
    assert dead(client, operated) == []


def test_the_dashboard_says_an_unconfirmed_requeue_is_requeued(
        operated: Minitask, pair: List[RedisServer], client: "redis.Redis[bytes]") -> None:
    plant(client, operated, "a5", 5)
    dashboard = Dashboard(operated)
    with frozen(pair[1], STALL):
        status, headers, _ = confirm(dashboard, "/actions/requeue", "task_id=a5")
    assert status == "303 See Other"
    page = call(dashboard, headers["Location"])[2]
    assert f"requeued a5 ({NOTE})" in page, page
    assert dead(client, operated) == []
