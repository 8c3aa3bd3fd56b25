"""The operators' view on fakeredis: the capped record of recent outcomes (each way an
attempt ends writes one entry, trimmed about as written and shown to its cap, none
when it is off), the running and scheduled listings read from leases and delayed
sets, hide_args in every view, and workers known by their --name. Real workers on a
real server: test_operators_view_redis."""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Tuple

import pytest

from minitask import ConfigurationError, Minitask, Retry
from minitask.admin import activity, dead_letters, inspect, live_workers, shutdown
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.queue import FetchTerms
from minitask.wire.message import Outcome
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.unit.test_dashboard import call

Tasks = Dict[str, Any]


def tasks_of(app: Minitask) -> Tasks:
    @app.task(name="shop.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="shop.flaky", retries=1, retry_backoff=0.001)
    def flaky() -> None:
        raise Retry(delay=0)

    @app.task(name="shop.boom")
    def boom() -> None:
        raise ValueError("no such account")

    @app.task(name="shop.login", hide_args=True)
    def login(user: str, password: str) -> str:
        return user

    @app.task(name="mail.send", queue="mail")
    def send(to: str) -> None:
        pass

    return {"add": add, "flaky": flaky, "boom": boom, "login": login, "send": send}


@pytest.fixture
def shop(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Tasks]:
    app = make_app("shop")
    return app, tasks_of(app)


def test_each_way_an_attempt_ends_writes_one_entry_newest_first(
        shop: Tuple[Minitask, Tasks], clock: ManualClock) -> None:
    app, tasks = shop
    added = tasks["add"].delay(2, 3)
    flaky = tasks["flaky"].delay()
    boom = tasks["boom"].delay()
    queued = tasks["add"].delay(1, 1)
    assert queued.cancel() is True
    worker = app.worker(["default"])
    drain(worker)
    clock.advance(1)
    drain(worker)  # the retry, which fails for good
    listing = activity.recent(app, limit=100)
    by_state = {(entry.task_id, entry.state): entry for entry in listing.tasks}
    assert set(by_state) == {(queued.id, "cancelled"), (added.id, "succeeded"),
                             (flaky.id, "retried"), (flaky.id, "dead"), (boom.id, "dead")}
    assert len(listing.tasks) == 5 and listing.total == 5
    assert [entry.at for entry in listing.tasks] == sorted(
        (entry.at for entry in listing.tasks), reverse=True)
    success = by_state[(added.id, "succeeded")]
    assert (success.name, success.queue, success.attempt, success.worker, success.error) == (
        "shop.add", "default", 1, worker.name, "")
    assert success.duration is not None and success.duration >= 0
    dead = by_state[(boom.id, "dead")]
    assert dead.error == "ValueError: no such account" and dead.worker == worker.name
    assert by_state[(flaky.id, "dead")].attempt == 2
    assert by_state[(flaky.id, "retried")].attempt == 1
    cancelled = by_state[(queued.id, "cancelled")]
    assert (cancelled.name, cancelled.attempt, cancelled.worker) == ("shop.add", 0, "")


def test_the_record_shows_exactly_its_cap_the_newest(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop", recent_outcomes=3)
    add = tasks_of(app)["add"]
    handles = [add.delay(i, 0) for i in range(10)]
    drain(app.worker(["default"]))
    client = app.broker.client
    # trimmed about (MAXLEN ~): one stream node (100 entries by default) more at most
    assert 3 <= client.xlen(queue_keys("shop", "default").recent) <= 3 + 100
    listing = activity.recent(app, limit=10)
    kept = [entry.task_id for entry in listing.tasks]
    assert sorted(kept) == sorted(handle.id for handle in handles[-3:])
    assert listing.total == 3


def test_a_batch_of_acks_and_the_ack_fetch_round_trip_each_write_their_entries(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop", recent_outcomes=100)
    tasks_of(app)["add"].delay_many([(i, i) for i in range(6)])
    broker = app.broker
    fetched = broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000,
                                  count=6, max_deliveries=5)
    results = broker.results
    acks = [results.prepare_ack("default", d.task_id, Outcome("succeeded", 1, value=1), 1000,
                                entry=results.entry(d.task_id, "shop.add", "succeeded", 1, 1))
            for d in fetched.deliveries]
    assert results.ack_many(acks[:3]) == [True] * 3
    held, _ = results.ack_then(acks[3:], broker.queues.fetch_call(
        "default", app.clock.now_ms(), FetchTerms(30_000, 1, 5)))
    assert held == [True] * 3
    assert len(activity.recent(app, state="succeeded").tasks) == 6


def test_no_record_is_written_when_it_is_off(make_app: Callable[..., Minitask],
                                             clock: ManualClock) -> None:
    app = make_app("shop", recent_outcomes=0)
    tasks = tasks_of(app)
    tasks["add"].delay(1, 2)
    tasks["flaky"].delay()
    tasks["boom"].delay()
    tasks["add"].delay(5, 5).cancel()
    tasks["send"].delay("a@b")
    worker = app.worker(["default", "mail"])
    drain(worker)
    clock.advance(1)
    drain(worker)
    client = app.broker.client
    assert [key for key in client.scan_iter(match="*recent*")] == []
    assert activity.recent(app).tasks == []


def test_recent_filters_by_queue_task_glob_and_state(shop: Tuple[Minitask, Tasks],
                                                     clock: ManualClock) -> None:
    app, tasks = shop
    tasks["add"].delay(1, 1)
    tasks["boom"].delay()
    tasks["flaky"].delay()
    tasks["send"].delay("x@y")
    worker = app.worker(["default", "mail"])
    drain(worker)
    clock.advance(1)
    drain(worker)
    assert {e.name for e in activity.recent(app, queues=["mail"]).tasks} == {"mail.send"}
    assert {e.name for e in activity.recent(app, task="shop.*").tasks} == {
        "shop.add", "shop.boom", "shop.flaky"}
    assert {(e.name, e.state) for e in activity.recent(app, state="failed").tasks} == {
        ("shop.boom", "dead"), ("shop.flaky", "retried"), ("shop.flaky", "dead")}
    assert [e.name for e in activity.recent(app, task="shop.boom", state="dead").tasks] == [
        "shop.boom"]
    assert len(activity.recent(app, limit=2).tasks) == 2
    with pytest.raises(ConfigurationError, match="no state 'lost'"):
        activity.recent(app, state="lost")
    with pytest.raises(ConfigurationError, match="has no queue 'nope'"):
        activity.recent(app, queues=["nope"])


def test_running_lists_the_leased_tasks_with_their_arguments_cut_or_hidden(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    long_text = "x" * 500
    tasks["add"].delay(long_text, 2)
    secret = tasks["login"].delay("ann", "hunter2")
    tasks["send"].delay("a@b")
    now = app.clock.now_ms()
    for queue in ("default", "mail"):
        app.broker.queues.fetch(queue, now_ms=now, lease_ms=30_000, count=10,
                                max_deliveries=5)
    listing = activity.running(app)
    assert listing.total == 3
    by_name = {item.name: item for item in listing.tasks}
    assert set(by_name) == {"shop.add", "shop.login", "mail.send"}
    assert all(item.state == "running" and item.deliveries == 1 for item in listing.tasks)
    assert by_name["shop.login"].args == activity.HIDDEN
    assert "hunter2" not in json.dumps([item.as_dict() for item in listing.tasks])
    assert len(by_name["shop.add"].args) <= activity.ARGS_CHARS
    assert by_name["shop.add"].args.startswith("'xxx")
    assert by_name["mail.send"].args == "'a@b'"
    assert by_name["shop.login"].task_id == secret.id
    assert [i.name for i in activity.running(app, task="shop.log*").tasks] == ["shop.login"]
    assert [i.name for i in activity.running(app, queues=["mail"]).tasks] == ["mail.send"]
    assert activity.scheduled(app).tasks == []


def test_scheduled_lists_delayed_tasks_soonest_first(shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    later = tasks["add"].apply_in(3600, 1, 1)
    sooner = tasks["add"].apply_in(60, 2, 2)
    tasks["add"].delay(3, 3)  # ready: not scheduled
    listing = activity.scheduled(app)
    assert [item.task_id for item in listing.tasks] == [sooner.id, later.id]
    assert listing.total == 2
    first = listing.tasks[0]
    assert first.at is not None
    assert int(first.at.timestamp() * 1000) == app.clock.now_ms() + 60_000
    assert len(activity.scheduled(app, limit=1).tasks) == 1


def test_hide_args_keeps_arguments_out_of_inspect_dead_letters_and_the_task_page(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task(name="vault.open", hide_args=True)
    def open_vault(password: str) -> None:
        raise ValueError("wrong")

    handle = open_vault.delay("hunter2")
    queued = inspect(app, handle.id)
    assert queued is not None and queued.args_hidden
    assert queued.args is None and queued.kwargs is None
    drain(app.worker(["default"]))
    letters = dead_letters(app)
    assert [(d.args, d.kwargs, d.args_hidden) for d in letters] == [([], {}, True)]
    dashboard = Dashboard(app)
    for path in (f"/task/{handle.id}", f"/api/task/{handle.id}", "/dead", "/api/dead"):
        status, _, text = call(dashboard, path)
        assert status.startswith("200") and "hunter2" not in text, path
    assert "hidden" in call(dashboard, f"/task/{handle.id}")[2]


def test_hide_args_must_be_a_bool(app: Minitask) -> None:
    with pytest.raises(ConfigurationError, match="hide_args must be True or False"):
        app.task(hide_args="yes")(lambda: None)


@pytest.mark.parametrize("value", [-1, 1.5, "10", True, 10**9])
def test_recent_outcomes_must_be_a_count(make_app: Callable[..., Minitask], value: Any) -> None:
    with pytest.raises(ConfigurationError, match="recent_outcomes must be an int"):
        make_app("shop", recent_outcomes=value)


def test_a_named_worker_is_listed_and_stopped_by_its_name_and_by_its_id(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, _ = shop
    first = app.worker(["default"], name="w1")
    second = app.worker(["default"], name="w1")
    other = app.worker(["default"])
    for worker in (first, second, other):
        worker.beat()
    live = {info["id"]: info for info in live_workers(app)}
    assert {info["name"] for info in live.values()} == {"w1", other.id}
    assert live[first.id]["name"] == "w1" and first.id != second.id
    assert sorted(shutdown(app, ["w1"])) == sorted([first.id, second.id])
    assert shutdown(app, [other.id]) == [other.id]
    for worker in (first, second, other):
        key = app.broker.registry.app_keys.control(worker.id)
        assert app.broker.client.lrange(key, 0, -1) != []
    with pytest.raises(ConfigurationError, match="is named 'w2'"):
        shutdown(app, ["w2"])
    workers = json.loads(call(Dashboard(app), "/api/workers")[2])["workers"]
    assert {type(w["concurrency"]) for w in workers} == {int}
    assert {type(w["pid"]) for w in workers} == {int}
    assert sorted(w["name"] for w in workers) == sorted(["w1", "w1", other.id])


def test_an_expired_task_and_a_poisoned_one_are_recorded_too(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app("shop", max_deliveries=1, visibility_timeout=1)
    add = tasks_of(app)["add"]
    expired = add.apply_async((1, 1), expires=5)
    clock.advance(10)
    drain(app.worker(["default"]))
    poisoned = add.delay(2, 2)
    app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=1000, count=1,
                            max_deliveries=1)  # a worker that then died with it
    clock.advance(5)
    drain(app.worker(["default"]))
    states = {(e.task_id, e.state, e.name, e.error.split(":")[0])
              for e in activity.recent(app).tasks}
    assert states == {(expired.id, "cancelled", "shop.add", "Expired"),
                      (poisoned.id, "dead", "shop.add", "RuntimeError")}


def test_the_json_api_lists_running_scheduled_and_recent(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    tasks["login"].delay("ann", "hunter2")
    tasks["add"].apply_in(60, 1, 2)
    tasks["send"].delay("a@b")
    drain(app.worker(["mail"]))
    app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000, count=5,
                            max_deliveries=5)
    dashboard = Dashboard(app)
    running = json.loads(call(dashboard, "/api/running")[2])
    assert [(t["name"], t["args"]) for t in running["tasks"]] == [("shop.login", "(hidden)")]
    assert "hunter2" not in json.dumps(running)
    scheduled = json.loads(call(dashboard, "/api/scheduled?task=shop.*")[2])
    assert [t["name"] for t in scheduled["tasks"]] == ["shop.add"]
    recent = json.loads(call(dashboard, "/api/recent?queue=mail&state=succeeded&limit=5")[2])
    assert [(t["name"], t["state"]) for t in recent["tasks"]] == [("mail.send", "succeeded")]
    for bad in ("/api/recent?state=lost", "/api/running?queue=nope", "/api/running?limit=0",
                "/api/running?limit=x"):
        assert call(dashboard, bad)[0].startswith("400"), bad
    assert call(dashboard, "/running")[0] == "200 OK"  # its page: test_dashboard_listings


def test_a_worker_is_listed_by_its_name_as_it_starts(shop: Tuple[Minitask, Tasks]) -> None:
    app, _ = shop
    worker = app.worker(["default"], name="w9")
    worker.starting()  # before its first heartbeat, a period later
    assert [(info["name"], info["id"]) for info in live_workers(app)] == [("w9", worker.id)]
    assert shutdown(app, ["w9"]) == [worker.id]


def test_a_record_key_of_another_type_costs_only_the_record(
        shop: Tuple[Minitask, Tasks], clock: ManualClock) -> None:
    app, tasks = shop
    key = queue_keys("shop", "default").recent
    app.broker.client.set(key, "someone's data")
    added, flaky, boom = tasks["add"].delay(1, 2), tasks["flaky"].delay(), tasks["boom"].delay()
    queued = tasks["add"].apply_in(60, 0, 0)
    assert queued.cancel() is True
    worker = app.worker(["default"])
    drain(worker)
    clock.advance(1)
    drain(worker)
    assert (added.status(), flaky.status(), boom.status()) == ("succeeded", "failed", "failed")
    # moved aside whole (lib.lua's aside()), and the outcomes recorded in a new record
    assert app.broker.client.get(key + ":foreign") == b"someone's data"
    assert {entry.task_id for entry in activity.recent(app).tasks} >= {
        added.id, flaky.id, boom.id}


def test_a_record_at_its_last_possible_id_costs_only_the_record(
        shop: Tuple[Minitask, Tasks], clock: ManualClock) -> None:
    """A planted entry at the last possible stream ID refuses every XADD after it: the
    record is moved aside whole and the outcomes are recorded all the same (they were
    refused, and the worker held its slots retrying them), and a cancel is not
    half-applied."""
    app, tasks = shop
    key = queue_keys("shop", "default").recent
    app.broker.client.xadd(key, {"e": "x"}, id="18446744073709551615-18446744073709551615")
    added, flaky, boom = tasks["add"].delay(1, 2), tasks["flaky"].delay(), tasks["boom"].delay()
    queued = tasks["add"].apply_in(60, 0, 0)
    assert queued.cancel() is True
    worker = app.worker(["default"])
    drain(worker)
    clock.advance(1)
    drain(worker)
    assert (added.status(), flaky.status(), boom.status()) == ("succeeded", "failed", "failed")
    assert (added.get(timeout=0), queued.status()) == (3, "cancelled")
    assert app.broker.client.xlen(key + ":foreign") == 1  # moved aside whole
    assert {entry.task_id for entry in activity.recent(app).tasks} >= {
        added.id, flaky.id, boom.id}


def test_entries_minitask_did_not_write_are_left_out(shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    key = queue_keys("shop", "default").recent
    client = app.broker.client
    client.xadd(key, {"x": "1"})
    client.xadd(key, {"e": b"\xc1not msgpack"})
    client.xadd(key, {"e": b"\x93\x01\x02\x03"})  # a list, not an entry
    added = tasks["add"].delay(1, 2)
    drain(app.worker(["default"]))
    assert [e.task_id for e in activity.recent(app).tasks] == [added.id]
