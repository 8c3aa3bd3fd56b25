"""What a scrape, a listing and a lookup by id cost stays the same whatever data
anyone planted beside minitask's, counted in bytes and commands on the suite's own
redis-server (probe 9, M4 and M8): 100,000 foreign metrics fields made a /metrics
scrape read 3.4 MB; 200,000 names in the queue registry made ``dead list``,
``status`` and ``inspect`` read 4.1 MB each, ``group_handle`` of an unknown id send
200,005 GETRANGEs and ``forget()`` 400,009 commands."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import AppKeys
from minitask.cli.main import main
from minitask.dashboard import views
from minitask.dashboard.metrics import exposition
from minitask.stores.metrics import MINUTE_MS, PICKUP, TASKS, Delta, name
from minitask.stores.names import REGISTRY_READ

pytestmark = pytest.mark.integration

APP = "bounded"
PLANTED = 200_000


@pytest.fixture
def client(redis_server: Any) -> Iterator["redis.Redis[bytes]"]:
    made = redis_server.client()
    made.flushall()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def app(redis_server: Any, client: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = Minitask(APP, broker=redis_server.url)

    @made.task(queue="mail")
    def send(n: int) -> int:
        return n

    try:
        yield made
    finally:
        made.close()


def _cost(client: "redis.Redis[bytes]", read: Callable[[], Any]) -> Tuple[Any, int, Dict[str, int]]:
    """What ``read()`` returned, the bytes Redis sent its clients, and its commands."""
    client.config_resetstat()
    before = int(client.info("stats")["total_net_output_bytes"])
    value = read()
    sent = int(client.info("stats")["total_net_output_bytes"]) - before
    commands = {key[len("cmdstat_"):]: int(stat["calls"])
                for key, stat in client.info("commandstats").items()
                if key not in ("cmdstat_info", "cmdstat_config|resetstat")}
    return value, sent, commands


def _plant_hash(client: "redis.Redis[bytes]", key: str, fields: List[str], value: bytes) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(fields), 10_000):
        pipe.hset(key, mapping={field: value for field in fields[start:start + 10_000]})
    pipe.execute()


def _plant_set(client: "redis.Redis[bytes]", key: str, members: List[str]) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(members), 10_000):
        pipe.sadd(key, *members[start:start + 10_000])
    pipe.execute()


def test_a_scrape_reads_a_bounded_number_of_bytes_beside_100000_foreign_fields(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    (send,) = app.tasks
    delta = Delta()
    delta.counts[TASKS, "mail", send, "succeeded"] += 7
    delta.counts[PICKUP, "mail", "0.005"] += 3
    app.broker.metrics.add(delta)
    # fields of the very form minitask writes, for queues the app does not declare
    _plant_hash(client, AppKeys(APP).metrics,
                [name(TASKS, f"q{i}", send, "succeeded") for i in range(100_000)], b"1")
    text, sent, _ = _cost(client, lambda: exposition(app).decode())
    assert sent < 60_000, sent  # 3.4 MB before: the whole hash
    assert (f'minitask_tasks_total{{outcome="succeeded",queue="mail",task="{send}"}} 7.0'
            in text), text
    assert 'minitask_pickup_latency_seconds_bucket{le="0.005",queue="mail"} 3.0' in text
    assert 'queue="q1"' not in text


def test_the_throughput_page_reads_only_the_queues_it_shows(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    minute = app.clock.now_ms() // MINUTE_MS
    delta = Delta()
    delta.minutes[minute, "mail"] += 5
    app.broker.metrics.add(delta)
    _plant_hash(client, AppKeys(APP).throughput(minute), [f"q{i}" for i in range(50_000)],
                b"1")
    shown, sent, _ = _cost(client, lambda: views.throughput(app))
    assert sent < 60_000, sent
    assert shown["totals"]["mail"] == 5


@pytest.fixture
def crowded(app: Minitask, client: "redis.Redis[bytes]") -> Minitask:
    """200,000 lane names in the queue registry, as many subscribers once made."""
    _plant_set(client, AppKeys(APP).queues, [f"news:sub{i}" for i in range(PLANTED)])
    return app


@pytest.mark.parametrize("command", [["dead", "list"], ["status"],
                                     ["inspect", "no-such-task"]])
def test_listings_and_lookups_read_a_bounded_part_of_the_registry(
        crowded: Minitask, client: "redis.Redis[bytes]", command: List[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("inspect", "dead", "status"):
        monkeypatch.setattr(f"minitask.cli.{module}.load", lambda _app: crowded)
    monkeypatch.setattr(crowded, "close", lambda: None)
    _, sent, commands = _cost(client, lambda: main([command[0], "-A", APP, *command[1:]]))
    said = capsys.readouterr()
    assert sent < 200_000, sent  # 4.1 MB before: SMEMBERS of the whole registry
    assert "smembers" not in commands
    # 1,002 queues read: at most 3 commands each (inspect of an unknown id asks for its
    # message, its result and a workflow's plan naming it: a step not sent yet)
    assert sum(commands.values()) < 4 * (REGISTRY_READ + 2), commands
    assert "more queue(s)" in said.out + said.err, said  # honest: not all were asked


def test_group_handle_of_an_unknown_id_asks_a_bounded_number_of_queues(
        crowded: Minitask, client: "redis.Redis[bytes]") -> None:
    def lookup() -> str:
        with pytest.raises(ConfigurationError) as raised:
            crowded.group_handle("nosuchgroup")
        return str(raised.value)

    said, sent, commands = _cost(client, lookup)
    assert commands.get("getrange", 0) <= REGISTRY_READ + 2, commands  # 200,005 before
    assert sent < 200_000, sent
    assert "nosuchgroup" in said and "were not searched" in said, said


def test_forget_and_status_of_an_unknown_id_ask_a_bounded_number_of_queues(
        crowded: Minitask, client: "redis.Redis[bytes]") -> None:
    _, sent, commands = _cost(client, lambda: crowded.handle("nosuchid").forget())
    assert sum(commands.values()) < 3 * (REGISTRY_READ + 2), commands  # 400,009 before
    assert sent < 200_000, sent
    status, sent, commands = _cost(client, lambda: crowded.handle("nosuchid").status())
    assert status == "unknown"
    assert sum(commands.values()) < 3 * (REGISTRY_READ + 2), commands


def test_a_task_of_a_declared_queue_is_found_beside_200000_names(
        crowded: Minitask) -> None:
    (task,) = crowded.tasks.values()
    handle = task.delay(1)
    assert crowded.handle(handle.id).status() == "queued"


def test_a_subscribers_lane_does_not_grow_the_queue_registry(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    @app.task(broadcast=True, queue="news")
    def reload() -> str:
        return "ok"

    app.worker(queues=["news"], subscriber="sub1").starting()
    keys = AppKeys(APP)
    assert b"news:sub1" not in client.smembers(keys.queues)
    assert client.smembers(keys.lanes) == {b"news:sub1"}
    assert "news:sub1" in app.broker.queues.queue_names()  # still listed, after queues
